#!/usr/bin/env bash
# docs/getting-started.md: every ```sh block runs, in order, in one scratch folder where build/trainsim is the
# binary under test and topologies/, workloads/ and tests/ are the repository's; each block must exit 0. Then the
# files the guide writes exist and its JSON output parses.
#   usage: getting_started_e2e.sh TRAINSIM_BINARY SOURCE_DIR
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 TRAINSIM_BINARY SOURCE_DIR" >&2
    exit 2
fi
bin="$(realpath "$1")"
src="$(realpath "$2")"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"
doc="$src/docs/getting-started.md"
mkdir -p "$tmp/work/build" && cd "$tmp/work" || exit 1
ln -s "$bin" build/trainsim
for d in topologies workloads tests; do ln -s "$src/$d" "$d"; done

# The ```sh blocks, one file each (block-N.sh), from the opening fence to the closing one.
awk -v dir="$tmp" '
    /^```sh[[:space:]]*$/ { n++; file = sprintf("%s/block-%02d.sh", dir, n); inside = 1; next }
    /^```[[:space:]]*$/ && inside { inside = 0; close(file); next }
    inside { print > file }
' "$doc"
blocks=("$tmp"/block-*.sh)
check "docs/getting-started.md has sh blocks" test "${#blocks[@]}" -ge 6
for b in "${blocks[@]}"; do
    name="$(basename "$b" .sh)"
    first="$(grep -m1 -v '^[[:space:]]*$' "$b")"
    bash -e -o pipefail "$b" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    check "$name ($first) exits 0" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || { head -5 "$tmp/$name.err"; }
done
check "my-cluster.json, my-model.json, my-runs.json written" test -s my-cluster.json -a -s my-model.json -a -s my-runs.json
check "what-if.json is a report" python3 -c 'import json,sys; d=json.load(open("what-if.json")); sys.exit(0 if d["step_time_s"] > 0 else 1)'
check "layouts.csv has a header and rows" test "$(wc -l <layouts.csv)" -ge 2
check "report.html and layouts.html are pages" grep -q '</html>' report.html layouts.html
cd "$src" || exit 1
exit $fail
