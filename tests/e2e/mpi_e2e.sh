#!/usr/bin/env bash
# `mpirun -np 2 trainsim sweep|validate` spreads the layouts / runs over two MPI processes: stdout, the CSV and
# the JSON are byte for byte those of the single process; an input error is printed once (rank 0) with
# exit 2. Skipped (exit 77) when mpirun is not installed.
# usage: mpi_e2e.sh TRAINSIM_BINARY SOURCE_DIR
set -u
bin="$1"
src="$2"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"
if ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: mpirun not found (Debian: openmpi-bin)"
    exit 77
fi
# Open MPI's mpirun: two processes on however many cores there are, as root in the CI container.
mpi=(mpirun -np 2 --oversubscribe --allow-run-as-root)

# Two cluster sizes, the margin and the time to train: every column of the ranking travels between ranks.
sweep=(sweep --topology "$src/topologies/dgx-a100.json" --workload "$src/tests/e2e/data/small.json"
       --gpus 16,24 --global-batch 48 --vary micro_batch=1,2 --vary recompute=none,selective
       --vary tp=1,2 --top 8 --jobs 1 --min-headroom 10% --tokens 1B --gpu-hour-price 2)
"$bin" "${sweep[@]}" --csv "$tmp/one.csv" >"$tmp/one.txt" 2>"$tmp/one.err"
check "single-process sweep exits 0" test $? -eq 0
"${mpi[@]}" "$bin" "${sweep[@]}" --csv "$tmp/two.csv" >"$tmp/two.txt" 2>"$tmp/two.err"
check "mpirun -np 2 sweep exits 0" test $? -eq 0
check "sweep: stdout identical under mpirun -np 2" cmp "$tmp/one.txt" "$tmp/two.txt"
check "sweep: CSV identical under mpirun -np 2" cmp "$tmp/one.csv" "$tmp/two.csv"
"$bin" "${sweep[@]}" --json >"$tmp/one.json" 2>/dev/null
"${mpi[@]}" "$bin" "${sweep[@]}" --json >"$tmp/two.json" 2>/dev/null
check "sweep: JSON identical under mpirun -np 2" cmp "$tmp/one.json" "$tmp/two.json"
check "sweep: the ranking holds both sizes" grep -q '^best layout per cluster size' "$tmp/one.txt"

# validate: a few small runs of the CI's file (one predicted out of memory), as text and JSON.
runs=(validate "$src/tests/validation/public_runs.json" --tolerance 100 --max-oom 1 --jobs 1
      --only mpt_a100_80gb_13b_seq2048_8gpu,nemo2407_fp8_LLAMA3-8B_8gpu,mpt_h100_80gb_7b_seq2048_8gpu,torchtitan_h100_202412_t1_8b_8gpu_fsdp,torchtitan_a100_64gpu_llama2_13b_none)
"$bin" "${runs[@]}" >"$tmp/v1.txt" 2>&1
check "single-process validate exits 0" test $? -eq 0
"${mpi[@]}" "$bin" "${runs[@]}" >"$tmp/v2.txt" 2>"$tmp/v2.err"
check "mpirun -np 2 validate exits 0" test $? -eq 0
check "validate: text identical under mpirun -np 2" cmp "$tmp/v1.txt" "$tmp/v2.txt"
"$bin" "${runs[@]}" --json >"$tmp/v1.json" 2>/dev/null
"${mpi[@]}" "$bin" "${runs[@]}" --json >"$tmp/v2.json" 2>/dev/null
check "validate: JSON identical under mpirun -np 2" cmp "$tmp/v1.json" "$tmp/v2.json"

# An input error: every rank meets it, rank 0 alone prints it; the launch exits 2.
"${mpi[@]}" "$bin" sweep --topology "$src/topologies/dgx-a100.json" --gpus 12 >"$tmp/bad.out" 2>"$tmp/bad.err"
check "mpirun -np 2 sweep with a bad --gpus exits 2" test $? -eq 2
check "the error is printed once" test "$(grep -c '^trainsim: error: sweep: --gpus = 12' "$tmp/bad.err")" -eq 1
check "nothing on stdout" test ! -s "$tmp/bad.out"
exit $fail
