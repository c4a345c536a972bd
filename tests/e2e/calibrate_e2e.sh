#!/usr/bin/env bash
# End-to-end checks of trainsim-calibrate's command line (no GPU time spent): --help, bad input (exit 2, one
# line, before any device is touched), and --self-check, which exits 5 with one line where there is no CUDA
# device and runs the GPU self-check (exit 0) where there is one. No profile is written in any case.
# usage: calibrate_e2e.sh TRAINSIM_CALIBRATE_BINARY SOURCE_DIR
set -u
bin="$1"
src="$2"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"

"$bin" --help >"$tmp/help.txt" 2>&1
check "--help exits 0" test $? -eq 0
check "--help names the profile format" grep -q 'trainsim-profile/1' "$tmp/help.txt"
check "--help lists --quick, --out, --gpu and --self-check" \
    bash -c "grep -q -- '--quick' '$tmp/help.txt' && grep -q -- '--out' '$tmp/help.txt' && grep -q -- '--gpu' '$tmp/help.txt' && grep -q -- '--self-check' '$tmp/help.txt'"

expect_input_error() {  # NAME PATTERN ARGS...
    local name="$1" pattern="$2"
    shift 2
    "$bin" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
    local rc=$?
    check "$name: exit 2" test "$rc" -eq 2
    check "$name: one line" test "$(wc -l <"$tmp/err.txt")" -eq 1
    check "$name: message" grep -q -- "$pattern" "$tmp/err.txt"
    check "$name: nothing on stdout" test ! -s "$tmp/out.txt"
}
# --plan needs no GPU: the GEMMs of a measured run's program, with Megatron's shapes (the 1.7B run: hidden 2048,
# seq 4096, TP 1: QKV y[4096, 6144] = x[4096, 2048] . W^T and its dgrad and wgrad).
"$bin" --plan --no-grid --from-runs "$src/tests/validation/public_runs.json" --id mcore_r0.8_h100_weak_1.7B \
    >"$tmp/plan.txt" 2>"$tmp/plan.err"
check "--plan exits 0 without a GPU" test $? -eq 0
check "--plan: QKV forward, dgrad and wgrad" bash -c "grep -q 'gemm bf16 4096x6144x2048 (mcore_r0.8_h100_weak_1.7B qkv_gemm)' '$tmp/plan.txt' && grep -q 'gemm bf16 4096x2048x6144 (mcore_r0.8_h100_weak_1.7B qkv_dgrad)' '$tmp/plan.txt' && grep -q 'gemm bf16 6144x2048x4096 (mcore_r0.8_h100_weak_1.7B qkv_wgrad)' '$tmp/plan.txt'"
check "--plan: the run's attention" grep -q 'attention b=1 heads=16 kv_heads=16 seq=4096 head_dim=128 causal' "$tmp/plan.txt"
check "--plan: collectives 1 KiB to 4 GiB" grep -q '23 sizes from 1024 to 4294967296 bytes' "$tmp/plan.txt"

# A failed write to standard output (a full disk, a closed pipe) is exit 2 with one line: --plan > /dev/full
# ended with exit 0, and SIGPIPE / SIGXFSZ killed it (round 10, docs/reliability.md).
"$bin" --plan --no-grid >/dev/full 2>"$tmp/err.txt"
check "--plan to /dev/full: exit 2" test $? -eq 2
check "--plan to /dev/full: one line naming standard output" \
    grep -qx 'trainsim-calibrate: error: writing failed: standard output' "$tmp/err.txt"

# (Each start loads cuBLAS and NCCL, about a second: a few representative cases only.)
expect_input_error "unknown --gpu" '--gpu = "X100" is not a known GPU' --gpu X100
expect_input_error "unknown option, the command named once" \
    "^trainsim-calibrate: error: unrecognised option '--bogus'$" --bogus
expect_input_error "unwritable --out" 'cannot write the file' --out "$tmp/no/such/dir/p.json" --workload \
    "$src/workloads/llama3-8b.json"
expect_input_error "bad workload file" 'no_such.json' --workload "$tmp/no_such.json"

"$bin" --self-check --out "$tmp/p.json" >"$tmp/out.txt" 2>"$tmp/err.txt"
rc=$?
if [ "$rc" -eq 5 ]; then
    check "no device: one line" test "$(wc -l <"$tmp/err.txt")" -eq 1
    check "no device: says so" grep -q '^trainsim-calibrate: error: no CUDA device: ' "$tmp/err.txt"
else
    check "--self-check on a GPU passes" test "$rc" -eq 0
    check "--self-check reports its checks" grep -q '^self-check gemm bf16 96x80x64: ok' "$tmp/err.txt"
fi
check "--self-check writes no profile" test ! -e "$tmp/p.json"

exit $fail
