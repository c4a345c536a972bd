#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, AddressSanitizer and UBSan in build-fuzz/ and runs each
# for SECONDS (default 60), one after the other, on one core. The seed corpus of each harness is copied from the
# shipped files listed in tests/fuzz/seeds/files.txt; what a run adds stays in BUILD/corpus/NAME. A crash
# leaves its input in BUILD/crash-NAME-*: turn it into a regression test (tests/e2e/bad_input_e2e.sh or a
# unit test) before fixing it. Prints executions, time and coverage per harness (the figures of
# docs/reliability.md). Exits 1 when any harness reports a finding (a crash, a sanitizer report, a timeout, an
# exception other than InputError, more than 4 GiB), so CI can run it (tools/scripts/run_tests.sh: 20 s each).
#   usage: tools/scripts/fuzz.sh [--fast] [--runs N] [SECONDS] [HARNESS...]
#     harnesses: topology workload calibration_profile measured_runs set import_megatron import_hf
#                import_torchtitan (default: all)
#     --fast     build-fuzz-fast/: -O2, libFuzzer's coverage instrumentation only (no ASan/UBSan), several times
#                the executions per second; for long runs toward the 10 M executions goal. A finding there is
#                a crash, an escaped exception, a timeout or the memory limit.
#     --runs N   stop each harness after N executions (or SECONDS, whichever comes first)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build-fuzz
BUILD_TYPE=RelWithDebInfo
SANITIZE=ON
RUNS=-1
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) BUILD=build-fuzz-fast; BUILD_TYPE=Release; SANITIZE=OFF; shift ;;
    --runs) RUNS="$2"; shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
SECONDS_EACH="${1:-60}"
shift $(( $# > 0 ? 1 : 0 ))
HARNESSES=("$@")
[ ${#HARNESSES[@]} -gt 0 ] || HARNESSES=(topology workload calibration_profile measured_runs set import_megatron import_hf import_torchtitan)

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

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DTRAINSIM_FUZZ=ON \
    -DTRAINSIM_FUZZ_SANITIZE="$SANITIZE" -DTRAINSIM_BUILD_TESTS=OFF -DTRAINSIM_BUILD_BENCH=OFF \
    -DTRAINSIM_CALIBRATE=OFF >&2
fi
targets=()
for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$BUILD" -j "$(nproc)" -t "${targets[@]}" >&2

findings=0
for h in "${HARNESSES[@]}"; do
  corpus="$BUILD/corpus/$h"
  mkdir -p "$corpus"
  grep -v '^#' tests/fuzz/seeds/files.txt | while read -r name file; do
    if [ "$name" = "$h" ]; then cp "$file" "$corpus/seed-$(basename "$file")"; fi
  done
  # Past findings (tests/fuzz/regressions/NAME/, replayed by ctest in every test build) seed the corpus too.
  if [ -d "tests/fuzz/regressions/$h" ]; then
    for file in tests/fuzz/regressions/"$h"/*; do cp "$file" "$corpus/regression-$(basename "$file")"; done
  fi
  log="$BUILD/fuzz-$h.log"
  start=$(date +%s.%N)
  status=0
  "$BUILD/tests/fuzz/fuzz_$h" "$corpus" -max_total_time="$SECONDS_EACH" -runs="$RUNS" -timeout=20 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="$BUILD/crash-$h-" -print_final_stats=1 >"$log" 2>&1 || status=$?
  end=$(date +%s.%N)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  # The last status line: "#N DONE cov: C ft: F corp: K/..." (or the last "pulse"/"NEW" line of a crashed run).
  cov=$(grep -E '^#[0-9]+' "$log" | tail -n1 | sed -nE 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/\1 \/ \2 \/ \3/p')
  printf 'fuzz %-20s %12s executions in %7.1f s  cov/ft/corpus %-22s exit %d  (log %s)\n' "$h" "$execs" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${cov:-?}" "$status" "$log"
  if [ "$status" -ne 0 ]; then
    findings=$((findings + 1))
    grep -m5 -E 'ERROR|SUMMARY|terminate|Test unit written' "$log" || true
  fi
done
if [ "$findings" -ne 0 ]; then
  echo "fuzz: $findings harness(es) reported a finding; inputs in $BUILD/crash-*" >&2
  exit 1
fi
