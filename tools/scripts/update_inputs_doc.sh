#!/usr/bin/env bash
# Regenerates docs/inputs.md from the input schemas (`trainsim schema --markdown`), or with --check compares
# it with what the build generates and fails, naming this command, when it is stale. Usage:
#   tools/scripts/update_inputs_doc.sh [--check] [path/to/trainsim]
set -euo pipefail
# shellcheck source=doc_script_args.sh
source "$(dirname "$0")/doc_script_args.sh"  # cd to the root; CHECK, BIN
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
