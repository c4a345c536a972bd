#!/usr/bin/env bash
# End-to-end tests of `trainsim goodput`: the interval sweep with Young/Daly beside the simulated optimum,
# byte-identical output for --jobs 1 and 2, the time-to-train figure, and bad options (exit 2, naming the
# option and its value).
#   usage: bash tests/e2e/goodput_e2e.sh <path-to-trainsim> <repo-root>
# Uses the 16-GPU configuration of tests/e2e/data/small.json on 2 DGX A100 nodes (well under a second each).
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 <path-to-trainsim> <repo-root>" >&2
    exit 2
fi
bin=$1
root=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trainsim-goodput-e2e.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
SMALL=(--topology "$root/topologies/dgx-a100.json" --workload "$root/tests/e2e/data/small.json"
       --set topology.nodes=2)
# Failures every ~2 h on 16 GPUs (the defaults would give one every few weeks) so the curve has a shape.
FAST=(--mtbf-gpu-h 32 --days 10)
fail=0
check() {
    local what=$1
    shift
    if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; fail=1; fi
}

"$bin" goodput "${SMALL[@]}" "${FAST[@]}" --seeds 20 --jobs 2 >"$tmp/auto.txt" 2>"$tmp/auto.err"
check "goodput (auto interval) exits 0" test $? -eq 0
check "prints the goodput row" grep -Eq '^    goodput +0\.[0-9]{4}' "$tmp/auto.txt"
check "prints Young's interval" grep -q 'Young sqrt(2 delta M)' "$tmp/auto.txt"
check "prints Daly's interval" grep -q 'Daly 2006' "$tmp/auto.txt"
check "marks the simulated optimum in the sweep" grep -q '<- simulated optimum' "$tmp/auto.txt"
check "prints the optimum beside Young/Daly" grep -Eq 'simulated optimum: every [0-9]+ steps .*Young/Daly' "$tmp/auto.txt"
check "prints failures by component" grep -Eq 'failures: gpu +[0-9]+' "$tmp/auto.txt"

# The check: the bare command (the embedded GPT-3 175B default) prints goodput and the simulated
# optimum beside Young/Daly's interval.
"$bin" goodput --seeds 20 --jobs 2 >"$tmp/bare.txt" 2>&1
check "bare goodput exits 0" test $? -eq 0
check "bare goodput prints goodput" grep -Eq '^    goodput +0\.[0-9]{4}' "$tmp/bare.txt"
check "bare goodput prints the optimum beside Young/Daly" \
    grep -Eq 'simulated optimum: every [0-9]+ steps .*Young/Daly: [0-9.]+ / [0-9.]+ steps' "$tmp/bare.txt"

"$bin" goodput "${SMALL[@]}" "${FAST[@]}" --seeds 30 --seed 5 --jobs 1 --json >"$tmp/j1.json" 2>/dev/null
"$bin" goodput "${SMALL[@]}" "${FAST[@]}" --seeds 30 --seed 5 --jobs 2 --json >"$tmp/j2.json" 2>/dev/null
check "same seed: --jobs 1 and --jobs 2 give byte-identical JSON" cmp -s "$tmp/j1.json" "$tmp/j2.json"
check "the JSON carries the goodput median" grep -q '"p50"' "$tmp/j1.json"
check "the JSON carries the sweep" grep -q '"interval_sweep"' "$tmp/j1.json"
"$bin" goodput "${SMALL[@]}" "${FAST[@]}" --seeds 30 --seed 6 --jobs 1 --json >"$tmp/j3.json" 2>/dev/null
check "another seed gives another result" bash -c "! cmp -s '$tmp/j1.json' '$tmp/j3.json'"

"$bin" goodput "${SMALL[@]}" --mtbf-gpu-h 32 --tokens 2e9 --checkpoint-interval 200 --checkpoint-mode async \
    --hot-spares 1 --seeds 10 >"$tmp/tokens.txt" 2>&1
check "--tokens with a fixed interval exits 0" test $? -eq 0
check "--tokens prints the time to train" grep -Eq 'time to train \(days\) +[0-9]' "$tmp/tokens.txt"
check "a fixed interval prints no sweep" bash -c "! grep -q 'simulated optimum' '$tmp/tokens.txt'"

bad() {  # bad <option> <value> [more args]: exit 2, one line naming the option and the value, nothing on stdout
    local opt=$1 val=$2
    shift 2
    "$bin" goodput "${SMALL[@]}" "$opt=$val" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local rc=$?
    check "$opt $val exits 2" test "$rc" -eq 2
    check "$opt $val: the message names the option and the value" \
        bash -c "grep -q -- '${opt}' '$tmp/bad.err' && grep -qF -- '${val}' '$tmp/bad.err'"
    check "$opt $val: nothing on stdout" test ! -s "$tmp/bad.out"
}
bad --seeds 0
bad --checkpoint-interval 0
bad --checkpoint-interval often
bad --checkpoint-mode lazy
bad --distribution gamma
bad --weibull-shape -1 --distribution weibull
bad --weibull-shape 0.1 --distribution weibull
bad --tokens 12abc
bad --mtbf-gpu-h -5
bad --days 0
bad --jobs 0
bad --restart-s nan
exit $fail
