#!/usr/bin/env bash
# The whole test suite: installs and builds (Release), runs the unit, end-to-end and validation tests, then builds
# the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer and runs them, then fuzzes every input loader
# for 20 s (clang + libFuzzer, ASan + UBSan; tools/scripts/fuzz.sh, docs/reliability.md). Exits non-zero on any
# failure, a fuzzer finding included. TRAINSIM_FUZZ_SECONDS changes the 20 s (0 skips the fuzzing).
set -euo pipefail
cd "$(dirname "$0")/../.."
tools/scripts/setup.sh build Release
ctest --test-dir build --output-on-failure -j 2
tools/scripts/setup.sh build-sanitize Debug -DTRAINSIM_SANITIZE=ON -DTRAINSIM_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-sanitize --output-on-failure -L unit -j 2
FUZZ_SECONDS="${TRAINSIM_FUZZ_SECONDS:-20}"
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  tools/scripts/fuzz.sh "$FUZZ_SECONDS"
fi
echo "all tests passed"
