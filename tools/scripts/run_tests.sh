#!/usr/bin/env bash
# The whole test suite: installs and builds (Release, without the unit tests: they run in the instrumented tree),
# runs the end-to-end and validation tests; then one instrumented build, build-sanitize/ (clang-14, Debug,
# AddressSanitizer + UBSan everywhere, libFuzzer's coverage instrumentation on the loaders' modules:
# TRAINSIM_SANITIZE=ON TRAINSIM_FUZZ=ON), of only the unit tests and the fuzz harnesses, in which it runs the unit
# tests (four shards, tests/unit_shard.sh) and the harnesses' replay of their seeds and past findings
# (ctest -L 'unit|fuzz_replay'), then fuzzes every input loader for TRAINSIM_FUZZ_SECONDS s (default 60), two
# harnesses at a time (tools/scripts/fuzz.sh), a finding failing the run; TRAINSIM_FUZZ_SECONDS=0 skips it.
# Both trees are unity builds (CMAKE_UNITY_BUILD=ON: each target's sources merged into a few translation units),
# which halves their compile time and pays for the fuzzing.
# Prints each step's wall time and the load; the budget arithmetic (the whole suite under 15 minutes on 2 cores)
# is in docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
step() {  # step NAME COMMAND...: runs it, then prints its wall time and the load average
  local name="$1" start=$SECONDS
  shift
  "$@"
  echo "run_tests: $name: $((SECONDS - start)) s (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}
# The unit tests and the fuzz replays are built and run once, in the sanitizer tree below (TRAINSIM_UNIT_TESTS=OFF
# here: compiling them at -O3 was a third of this build).
step "release build" tools/scripts/setup.sh build Release -DTRAINSIM_UNIT_TESTS=OFF -DCMAKE_UNITY_BUILD=ON
step "release tests" ctest --test-dir build --output-on-failure -j 2
# No benchmarks, no CUDA trainsim-calibrate (nvcc), no CLI in it: only what runs below.
harnesses=(topology workload calibration_profile measured_runs set import_megatron import_hf import_torchtitan)
targets="trainsim_unit_tests"
for h in "${harnesses[@]}"; do targets+=" replay_$h fuzz_$h"; done
# Debug at -g1 (line tables only: sanitizer reports keep file:line; full -g cost 12% more compile time).
step "sanitizer build" env CC=clang-14 CXX=clang++-14 SETUP_TARGETS="$targets" tools/scripts/setup.sh build-sanitize \
  Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DCMAKE_CXX_COMPILER=clang++-14 -DTRAINSIM_SANITIZE=ON -DTRAINSIM_FUZZ=ON \
  -DTRAINSIM_BUILD_BENCH=OFF -DTRAINSIM_CALIBRATE=OFF -DTRAINSIM_PYTHON=OFF -DCMAKE_UNITY_BUILD=ON
step "sanitizer tests" env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-sanitize --output-on-failure -L 'unit|fuzz_replay' -j 2
FUZZ_SECONDS="${TRAINSIM_FUZZ_SECONDS:-30}"
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  step "fuzzing" tools/scripts/fuzz.sh --build build-sanitize --jobs 2 "$FUZZ_SECONDS"
fi
echo "all tests passed"
