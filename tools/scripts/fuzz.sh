#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, AddressSanitizer and UBSan in build-fuzz/ and runs each
# for SECONDS (default 60), one after the other, on one core. The seed corpus of each harness is copied from the
# shipped files listed in tests/fuzz/seeds/files.txt; what a run adds stays in build-fuzz/corpus/NAME. A crash
# leaves its input in build-fuzz/crash-NAME-*: turn it into a regression test (tests/e2e/bad_input_e2e.sh or a
# unit test) before fixing it. Prints executions and time per harness (the figures of docs/reliability.md).
#   usage: tools/scripts/fuzz.sh [SECONDS] [HARNESS...]   (harnesses: topology workload calibration_profile
#          measured_runs set; default: all)
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH="${1:-60}"
shift $(( $# > 0 ? 1 : 0 ))
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(topology workload calibration_profile measured_runs set)

# clang and libFuzzer come from Debian (clang-14, libclang-rt-14-dev), installed when missing.
missing=()
for p in clang-14 libclang-rt-14-dev cmake ninja-build; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "fuzz: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2 || true
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

BUILD=build-fuzz
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRAINSIM_FUZZ=ON \
    -DTRAINSIM_BUILD_TESTS=OFF -DTRAINSIM_BUILD_BENCH=OFF -DTRAINSIM_CALIBRATE=OFF >&2
fi
targets=()
for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$BUILD" -j "$(nproc)" -t "${targets[@]}" >&2

for h in "${HARNESSES[@]}"; do
  corpus="$BUILD/corpus/$h"
  mkdir -p "$corpus"
  grep -v '^#' tests/fuzz/seeds/files.txt | while read -r name file; do
    if [ "$name" = "$h" ]; then cp "$file" "$corpus/seed-$(basename "$file")"; fi
  done
  log="$BUILD/fuzz-$h.log"
  start=$(date +%s.%N)
  status=0
  "$BUILD/tests/fuzz/fuzz_$h" "$corpus" -max_total_time="$SECONDS_EACH" -timeout=20 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="$BUILD/crash-$h-" -print_final_stats=1 >"$log" 2>&1 || status=$?
  end=$(date +%s.%N)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  printf 'fuzz %-20s %12s executions in %6.1f s  exit %d  (log %s)\n' "$h" "$execs" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$status" "$log"
  if [ "$status" -ne 0 ]; then
    grep -m5 -E 'ERROR|SUMMARY|terminate|Test unit written' "$log" || true
  fi
done
