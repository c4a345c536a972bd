#!/usr/bin/env bash
# Regenerates the reference run fingerprints (tests/fingerprints/*.fingerprint) from a build of trainsim.
# Run it when the model changes on purpose, and say in the commit why the fingerprints moved.
#   usage: tools/scripts/update_fingerprints.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${1:-build}"
exec bash tests/fingerprints/check_fingerprints.sh "$BUILD_DIR/trainsim" "$PWD" --update
