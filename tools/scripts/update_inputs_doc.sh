#!/usr/bin/env bash
# Regenerates docs/inputs.md from the input schemas (`trainsim schema --markdown`), or with --check compares
# it with what the build generates and fails, naming this command, when it is stale. Usage:
#   tools/scripts/update_inputs_doc.sh [--check] [path/to/trainsim]
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECK=0
if [ "${1:-}" = "--check" ]; then
  CHECK=1
  shift
fi
BIN="${1:-build/trainsim}"
OUT=docs/inputs.md
TMP="$(mktemp)"
trap 'rm -f "$TMP"' EXIT
"$BIN" schema --markdown >"$TMP"
if [ "$CHECK" = 1 ]; then
  if ! diff -u "$OUT" "$TMP"; then
    echo "docs/inputs.md is stale: run tools/scripts/update_inputs_doc.sh" >&2
    exit 1
  fi
  echo "docs/inputs.md is up to date"
  exit 0
fi
cat "$TMP" >"$OUT"
echo "wrote $OUT"
