# The shared preamble of the doc generators (update_docs.sh, update_inputs_doc.sh), sourced by them with their
# own arguments in place: goes to the repository root and reads `[--check] [path/to/trainsim]` into
#   CHECK  1 with --check (compare with what the build generates, and fail naming the stale file), else 0
#   BIN    the trainsim binary as an absolute path (default build/trainsim); exit 2 when it is not executable
# usage (first lines of a generator, after `set -euo pipefail`):
#   source "$(dirname "$0")/doc_script_args.sh"
cd "$(dirname "$0")/../.."
CHECK=0
if [ "${1:-}" = "--check" ]; then
  CHECK=1
  shift
fi
BIN="${1:-build/trainsim}"
[ -x "$BIN" ] || { echo "$(basename "$0" .sh): no trainsim binary at $BIN (build first)" >&2; exit 2; }
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
