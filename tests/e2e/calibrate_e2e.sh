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
expect_input_error "unknown --only section" '--only: "foo" is not one of' --only gemm,foo
expect_input_error "unknown --gpu" '--gpu = "X100" is not a known GPU' --gpu X100
expect_input_error "--topology without a workload" 'give --workload' --topology "$src/topologies/dgx-h100.json"
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
