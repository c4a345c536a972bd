#!/usr/bin/env bash
# End-to-end tests of the what-if options (docs/what-if.md): --straggler, --jitter, --link, --seed, --seeds.
#   usage: bash tests/e2e/what_if_e2e.sh <path-to-trainsim> <repo-root>
# Plain bash + grep/cmp/awk. Prints one PASS/FAIL line per check; exits 1 if any check fails. Most checks use the
# 16-GPU configuration of run_e2e.sh; the 1024-GPU default runs twice (plain and with a straggler), concurrently.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 <path-to-trainsim> <repo-root>" >&2
    exit 2
fi
BIN=$1
ROOT=$2
DATA=$ROOT/tests/e2e/data
TOPO=$ROOT/topologies/dgx-a100.json
TMP=$(mktemp -d "${TMPDIR:-/tmp}/trainsim-whatif.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
SMALL=(--topology "$TOPO" --workload "$DATA/small.json" --set topology.nodes=2)

# shellcheck source=pass_fail_lib.sh
source "$(dirname "$0")/pass_fail_lib.sh"  # pass, fail, run, rc_of, check_rc, check_has, check_bad

# The first "step_time_s" of a JSON report (the report's own, before the what_if section).
step_of() { grep -m 1 -E '^  "step_time_s": ' "$1" | sed -E 's/.*: ([0-9.e+-]+),?/\1/'; }

# ---- 1. the default with one straggler (1024 GPUs, run concurrently with the small checks) ----
"$BIN" run --json >"$TMP/default.out" 2>"$TMP/default.err" &
pid_default=$!
"$BIN" run --straggler gpu=17,slowdown=1.5 --json >"$TMP/straggler.out" 2>"$TMP/straggler.err" &
pid_straggler=$!

# ---- 2. determinism: the same seed twice, and --jobs 1 vs 2 ----
run jit1 run "${SMALL[@]}" --jitter lognormal,sigma=0.05 --seed 7
run jit2 run "${SMALL[@]}" --jitter lognormal,sigma=0.05 --seed 7
check_rc "2a --jitter lognormal,sigma=0.05 --seed 7" jit1 0
if cmp -s "$TMP/jit1.out" "$TMP/jit2.out"; then pass "2a the same seed twice: identical output"; else fail "2a the same seed twice differs"; fi
run jit3 run "${SMALL[@]}" --jitter lognormal,sigma=0.05 --seed 8
if cmp -s "$TMP/jit1.out" "$TMP/jit3.out"; then fail "2b another seed gives the same output"; else pass "2b another seed gives another output"; fi
run seeds1 run "${SMALL[@]}" --jitter lognormal,sigma=0.05 --straggler fraction=0.1,slowdown=1.2 --seeds 5 --jobs 1 --json
run seeds2 run "${SMALL[@]}" --jitter lognormal,sigma=0.05 --straggler fraction=0.1,slowdown=1.2 --seeds 5 --jobs 2 --json
check_rc "2c --seeds 5 --jobs 1" seeds1 0
if cmp -s "$TMP/seeds1.out" "$TMP/seeds2.out"; then pass "2c --seeds 5: --jobs 1 and --jobs 2 byte-identical"; else fail "2c --jobs 1 and --jobs 2 differ"; fi
check_has "2d --seeds --json carries the study" "$TMP/seeds1.out" '"what_if"' '"median_step_time_s"' \
    '"p90_step_time_s"' '"p99_step_time_s"' '"median_slowdown"' '"most_frequent_critical_gpu"' '"count": 5'

# ---- 3. the text report's what-if section ----
run text run "${SMALL[@]}" --straggler gpu=5,slowdown=1.3 --link node1.nic2,bandwidth=0.5
check_rc "3a --straggler and --link" text 0
check_has "3a the what-if section" "$TMP/text.out" "what-if: --straggler gpu=5,slowdown=1.3 --link node1.nic2,bandwidth=0.5" \
    "unperturbed" "critical path" "GPU      5" "perturbed links" "per pipeline stage" "TP wait" "DP wait"
run plain run "${SMALL[@]}" --json
if grep -q what_if "$TMP/plain.out"; then fail "3b an unperturbed run has a what_if section"; else pass "3b no what_if section without a perturbation"; fi

# ---- 3c. a fraction below one GPU slows one GPU (round 14) ----
# Round 13 listed `--straggler fraction=1e-300` as slowing no GPU; it slows round(X * GPUs) GPUs, at least one
# (docs/what-if.md): the same run as fraction=1/16 of these 16 GPUs, and slower than the unperturbed one.
run frac_tiny run "${SMALL[@]}" --straggler fraction=1e-300,slowdown=2 --json
run frac_one run "${SMALL[@]}" --straggler fraction=0.0625,slowdown=2 --json
check_rc "3c --straggler fraction=1e-300" frac_tiny 0
if [ "$(grep -c '"compute_factor": 2.0' "$TMP/frac_tiny.out")" = 1 ] &&
    [ "$(sed 's/fraction=1e-300/fraction=0.0625/' "$TMP/frac_tiny.out" | cmp - "$TMP/frac_one.out" && echo same)" = same ]; then
    pass "3c fraction=1e-300 slows one GPU: the run of fraction=1/16"
else fail "3c fraction=1e-300 is not the run of fraction=1/16" "$(grep -c '"compute_factor": 2.0' "$TMP/frac_tiny.out") GPUs slowed"; fi

# ---- 5. sweep under a perturbation: ranked by the median over seeds, the same with 1 and 2 threads ----
SWEEP=(sweep --topology "$TOPO" --workload "$DATA/small.json" --gpus 16 --global-batch 32 --vary micro_batch=1
    --vary recompute=none --vary tp=1,2 --vary pp=1,2 --vary vpp=1 --vary distributed_optimizer=false
    --straggler gpu=3,slowdown=1.3 --jitter lognormal,sigma=0.05 --seeds 3)
run sweep1 "${SWEEP[@]}" --jobs 1
run sweep2 "${SWEEP[@]}" --jobs 2
check_rc "5a sweep --straggler --jitter --seeds 3" sweep1 0
check_has "5a the sweep names the perturbations" "$TMP/sweep1.out" \
    "what-if: every layout under --straggler gpu=3,slowdown=1.3 --jitter lognormal,sigma=0.05; ranked by the median step time over 3 seeds"
if cmp -s "$TMP/sweep1.out" "$TMP/sweep2.out"; then pass "5b perturbed sweep: --jobs 1 and 2 identical"; else fail "5b perturbed sweep: --jobs 1 and 2 differ"; fi
check_bad "5c sweep: a bad --link" sweep_bad "--link" "node9.nic0" -- "${SWEEP[@]}" --link node9.nic0,bandwidth=0.5

# ---- 4. bad perturbation options: exit 2 naming the option and the value ----
check_bad "4a a GPU that is not a number" bad_gpu "--straggler" "gpu=x,slowdown=1.3" '"x"' -- run "${SMALL[@]}" --straggler gpu=x,slowdown=1.3
check_bad "4b a GPU out of range" bad_range "--straggler" "gpu = 16" -- run "${SMALL[@]}" --straggler gpu=16,slowdown=1.3
check_bad "4c a slowdown below 1" bad_slow "--straggler" "slowdown = 0.9" -- run "${SMALL[@]}" --straggler gpu=1,slowdown=0.9
check_bad "4d an unknown distribution" bad_dist "--jitter" '"uniform"' -- run "${SMALL[@]}" --jitter uniform,sigma=0.1
check_bad "4e an unknown link name" bad_link "--link" '"node1.gpu3"' -- run "${SMALL[@]}" --link node1.gpu3,bandwidth=0.5
check_bad "4f a node out of range" bad_node "--link node7.nic0,down" "node 7" -- run "${SMALL[@]}" --link node7.nic0,down
check_bad "4g a bad latency" bad_lat "--link" "latency" -- run "${SMALL[@]}" --link rail1,latency=5
check_bad "4h --seeds 0" bad_seeds "--seeds" -- run "${SMALL[@]}" --jitter lognormal,sigma=0.1 --seeds 0
check_bad "4i --seed that is not a number" bad_seed "--seed" "abc" -- run "${SMALL[@]}" --jitter lognormal,sigma=0.1 --seed abc

# ---- 1 (continued) ----
wait "$pid_default"
rc_default=$?
wait "$pid_straggler"
rc_straggler=$?
if [ "$rc_default" = 0 ] && [ "$rc_straggler" = 0 ]; then
    base=$(step_of "$TMP/default.out")
    slow=$(step_of "$TMP/straggler.out")
    if awk -v b="$base" -v s="$slow" 'BEGIN { exit !(s > b && s <= 1.5 * b) }'; then
        pass "1a --straggler gpu=17,slowdown=1.5 slows the default step ${base} s -> ${slow} s (> 1x, <= 1.5x)"
    else
        fail "1a --straggler gpu=17,slowdown=1.5: ${base} s -> ${slow} s, expected > 1x and <= 1.5x"
    fi
    check_has "1b the straggler is the critical rank" "$TMP/straggler.out" '"gpu": 17' '"unperturbed_step_time_s"'
else
    fail "1a the default runs: exit codes $rc_default and $rc_straggler" "$(head -c 400 "$TMP/straggler.err")"
fi

echo "what_if_e2e: $passes passed, $failures failed"
[ "$failures" -eq 0 ]
