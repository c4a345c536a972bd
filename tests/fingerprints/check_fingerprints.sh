#!/usr/bin/env bash
# Run fingerprints of the reference runs (include/trainsim/fingerprint.hpp): for every tests/fingerprints/NAME.args
# (`trainsim run` arguments, split at blanks, paths relative to the repository root, `#` comments), runs
# `trainsim run ARGS --fingerprint` and compares its line with NAME.fingerprint byte for byte.
#   usage: check_fingerprints.sh <path-to-trainsim> <repo-root> [--update]
# --update rewrites the .fingerprint files instead (tools/scripts/update_fingerprints.sh); the commit that does it
# says why the behaviour changed. Exits 1 if a fingerprint differs or a run fails.
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 <path-to-trainsim> <repo-root> [--update]" >&2
    exit 2
fi
BIN=$1
ROOT=$2
UPDATE=${3:-}
cd "$ROOT" || exit 1
fail=0
n=0
for args_file in tests/fingerprints/*.args; do
    name=$(basename "$args_file" .args)
    expected=tests/fingerprints/$name.fingerprint
    args=()
    while read -r -a words; do
        args+=("${words[@]}")
    done < <(grep -v '^[[:space:]]*#' "$args_file")
    got=$("$BIN" run "${args[@]}" --fingerprint 2>/dev/null)
    rc=$?
    n=$((n + 1))
    # 0: fits in memory; 3: runs out of memory (the timeline is still simulated and fingerprinted).
    if [ $rc -ne 0 ] && [ $rc -ne 3 ]; then
        echo "FAIL $name: trainsim run exited $rc"
        fail=1
        continue
    fi
    if [ "$UPDATE" = "--update" ]; then
        printf '%s\n' "$got" >"$expected"
        echo "wrote $expected: $got"
    elif [ ! -f "$expected" ]; then
        echo "FAIL $name: $expected is missing (tools/scripts/update_fingerprints.sh writes it)"
        fail=1
    elif [ "$got" != "$(cat "$expected")" ]; then
        echo "FAIL $name: the fingerprint changed"
        echo "     expected $(cat "$expected")"
        echo "     got      $got"
        fail=1
    else
        echo "ok   $name: $got"
    fi
done
if [ $n -eq 0 ]; then
    echo "FAIL no tests/fingerprints/*.args"
    exit 1
fi
exit $fail
