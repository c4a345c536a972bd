#!/usr/bin/env bash
# The whole test suite: installs and builds (Release), runs the unit, end-to-end and validation tests, then builds
# the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer and runs them; with TRAINSIM_FUZZ_SECONDS=N
# (N > 0) it then fuzzes every input loader for N s (clang + libFuzzer, ASan + UBSan; tools/scripts/fuzz.sh,
# docs/reliability.md), a finding failing the run. The default is 0 (no fuzzing) until the fuzz step has been run
# end to end on a clean clone within the suite's 15-minute budget (the suite alone took 13 min 38 s on a clean clone on 2 cores, 2026-11-23).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/scripts/setup.sh build Release
ctest --test-dir build --output-on-failure -j 2
# The sanitizer build runs only the unit tests and the fuzz harnesses' replay of their seeds and past findings
# (tests/fuzz/CMakeLists.txt): no benchmarks, no CUDA trainsim-calibrate (nvcc) in it.
tools/scripts/setup.sh build-sanitize Debug -DTRAINSIM_SANITIZE=ON -DTRAINSIM_BUILD_BENCH=OFF -DTRAINSIM_CALIBRATE=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-sanitize --output-on-failure -L 'unit|fuzz_replay' -j 2
FUZZ_SECONDS="${TRAINSIM_FUZZ_SECONDS:-0}"
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  tools/scripts/fuzz.sh "$FUZZ_SECONDS"
fi
echo "all tests passed"
