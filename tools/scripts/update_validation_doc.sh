#!/usr/bin/env bash
# Regenerates docs/validation.md: simulates every run of shared/validation/public_runs.json with the current build
# and writes the table. Usage: tools/scripts/update_validation_doc.sh [path/to/trainsim] [runs.json]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${1:-build/trainsim}"
RUNS="${2:-../shared/validation/public_runs.json}"
OUT=docs/validation.md
TMP="$(mktemp)"
trap 'rm -f "$TMP"' EXIT
set +e
"$BIN" validate "$RUNS" > "$TMP.table"
rc=$?
"$BIN" validate "$RUNS" --json | python3 tools/scripts/validation_families.py > "$TMP.families"
set -e
[ "$rc" -eq 0 ] || [ "$rc" -eq 4 ] || { echo "validate failed with exit code $rc" >&2; exit "$rc"; }
{
  sed -n '1,/^<!-- generated table below -->$/p' docs/validation.header.md
  echo
  echo "Command: \`tools/scripts/update_validation_doc.sh\` (runs \`trainsim validate $RUNS\`), $(date -u +%Y-%m-%d)."
  echo
  echo "Per source family (the run id up to its first '_'; bias = mean signed error, negative = trainsim too fast;"
  echo "\`tools/scripts/validation_families.py\` over \`trainsim validate --json\`):"
  echo
  echo '```text'
  cat "$TMP.families"
  echo '```'
  echo
  echo '```text'
  cat "$TMP.table"
  echo '```'
} > "$TMP"
rm -f "$TMP.table" "$TMP.families"
mv "$TMP" "$OUT"
trap - EXIT
echo "wrote $OUT" >&2
