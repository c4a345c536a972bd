#!/usr/bin/env bash
# Rewrites the CLI's golden outputs (tests/e2e/golden/*.out) from a build of trainsim. Run it when an output
# changes on purpose (a model or format change), review the diff, and say in the commit why the goldens moved.
#   usage: tools/scripts/update_golden.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR="${1:-build}"
exec bash tests/e2e/golden_e2e.sh "$BUILD_DIR/trainsim" "$PWD" --update
