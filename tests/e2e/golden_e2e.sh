#!/usr/bin/env bash
# Golden outputs of the CLI: every case of tests/e2e/golden/cases.txt (NAME and trainsim arguments, run from the
# repository root) must print exactly tests/e2e/golden/NAME.out on stdout and exit 0; a difference is shown as
# a unified diff. Deterministic output is a rule of the house, so any change in the output is either a bug or
# a deliberate change of the model or the format: then run tools/scripts/update_golden.sh and say in the commit
# why the goldens moved.
#   usage: golden_e2e.sh TRAINSIM_BINARY SOURCE_DIR [--update]
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 TRAINSIM_BINARY SOURCE_DIR [--update]" >&2
    exit 2
fi
bin="$1"
src="$2"
update="${3:-}"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"
cd "$src" || exit 1
golden=tests/e2e/golden
cases=0
while read -r name rest; do
    case "$name" in '' | '#'*) continue ;; esac
    read -r -a args <<<"$rest"
    cases=$((cases + 1))
    "$bin" "${args[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    if [ "$update" = "--update" ]; then
        check "$name exits 0" test "$rc" -eq 0
        cp "$tmp/$name.out" "$golden/$name.out"
        echo "     wrote $golden/$name.out"
        continue
    fi
    check "$name exits 0" test "$rc" -eq 0
    if [ ! -f "$golden/$name.out" ]; then
        check "$name: $golden/$name.out exists (tools/scripts/update_golden.sh writes it)" false
    elif ! cmp -s "$tmp/$name.out" "$golden/$name.out"; then
        check "$name: output equals $golden/$name.out" false
        diff -u "$golden/$name.out" "$tmp/$name.out" | head -40
    else
        check "$name: output equals $golden/$name.out" true
    fi
done <"$golden/cases.txt"
check "golden cases listed" test "$cases" -gt 0
exit "$fail"
