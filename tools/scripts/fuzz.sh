#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz) with clang, AddressSanitizer and UBSan in build-fuzz/ and runs each
# for SECONDS (default 60), JOBS at a time (default 1). The seed corpus of each harness is copied from the
# shipped files listed in tests/fuzz/seeds/files.txt; what a run adds stays in BUILD/corpus/NAME. A crash
# leaves its input in BUILD/crash-NAME-*: turn it into a regression input (tests/fuzz/regressions/NAME/, replayed
# by ctest) before fixing it. Prints executions, time and coverage per harness (the figures of
# docs/reliability.md). Exits 1 when any harness reports a finding (a crash, a sanitizer report, a timeout, an
# exception other than InputError, more than 4 GiB), so CI can run it (tools/scripts/run_tests.sh).
#   usage: tools/scripts/fuzz.sh [--fast] [--build DIR] [--jobs N] [--runs N] [SECONDS] [HARNESS...]
#     harnesses: topology workload calibration_profile measured_runs set import_megatron import_hf
#                import_torchtitan (default: all)
#     --fast     build-fuzz-fast/: -O2, libFuzzer's coverage instrumentation only (no ASan/UBSan), several times
#                the executions per second; for long runs toward the 10 M executions goal. A finding there is
#                a crash, an escaped exception, a timeout or the memory limit.
#     --build DIR  use DIR, an already configured clang tree with TRAINSIM_FUZZ=ON (run_tests.sh passes its
#                sanitizer build, TRAINSIM_SANITIZE=ON TRAINSIM_FUZZ=ON), instead of configuring build-fuzz/
#     --jobs N   run N harnesses at a time (one libFuzzer process each; 2 on the 2-core CI machine)
#     --runs N   stop each harness after N executions (or SECONDS, whichever comes first)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build-fuzz
BUILD_TYPE=RelWithDebInfo
SANITIZE=ON
RUNS=-1
JOBS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) BUILD=build-fuzz-fast; BUILD_TYPE=Release; SANITIZE=OFF; shift ;;
    --build) BUILD="${2%/}"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ "$JOBS" -ge 1 ] 2>/dev/null || { echo "fuzz.sh: --jobs needs a number >= 1" >&2; exit 2; }
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

if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DTRAINSIM_FUZZ=ON \
    -DTRAINSIM_FUZZ_SANITIZE="$SANITIZE" -DTRAINSIM_BUILD_TESTS=OFF -DTRAINSIM_BUILD_BENCH=OFF \
    -DTRAINSIM_CALIBRATE=OFF >&2
fi
targets=()
for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
cmake --build "$BUILD" -j "$(nproc)" -t "${targets[@]}" >&2

# One harness: seeds its corpus, fuzzes, writes its summary line to BUILD/fuzz-NAME.summary and exits with
# libFuzzer's status (0: no finding).
fuzz_one() {
  local h="$1" corpus="$BUILD/corpus/$1" log="$BUILD/fuzz-$1.log" start end status=0 execs cov
  rm -f "$BUILD/fuzz-$h.status"
  mkdir -p "$corpus"
  grep -v '^#' tests/fuzz/seeds/files.txt | while read -r name file; do
    if [ "$name" = "$h" ]; then cp -r "$file" "$corpus/seed-$(basename "$file")"; fi
  done
  # Past findings (tests/fuzz/regressions/NAME/, replayed by ctest in every test build) seed the corpus too.
  if [ -d "tests/fuzz/regressions/$h" ]; then
    for file in tests/fuzz/regressions/"$h"/*; do cp "$file" "$corpus/regression-$(basename "$file")"; done
  fi
  start=$(date +%s.%N)
  "$BUILD/tests/fuzz/fuzz_$h" "$corpus" -max_total_time="$SECONDS_EACH" -runs="$RUNS" -timeout=20 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="$BUILD/crash-$h-" -print_final_stats=1 >"$log" 2>&1 || status=$?
  end=$(date +%s.%N)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  # The last status line: "#N DONE cov: C ft: F corp: K/..." (or the last "pulse"/"NEW" line of a crashed run).
  cov=$(grep -E '^#[0-9]+' "$log" | tail -n1 | sed -nE 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/\1 \/ \2 \/ \3/p' || true)
  {
    printf 'fuzz %-20s %12s executions in %7.1f s  cov/ft/corpus %-22s exit %d  (log %s)\n' "$h" "$execs" \
      "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${cov:-?}" "$status" "$log"
    if [ "$status" -ne 0 ]; then grep -m5 -E 'ERROR|SUMMARY|terminate|Test unit written' "$log" || true; fi
  } >"$BUILD/fuzz-$h.summary"
  echo "$status" >"$BUILD/fuzz-$h.status"
}

# JOBS harnesses at a time; each summary printed as its harness ends.
findings=0
running=()
collect_finished() {  # prints the summaries of the harnesses that have ended, keeps the others in `running`
  local still=() r
  for r in "${running[@]}"; do
    if [ -f "$BUILD/fuzz-$r.status" ]; then
      cat "$BUILD/fuzz-$r.summary"
      [ "$(cat "$BUILD/fuzz-$r.status")" -eq 0 ] || findings=$((findings + 1))
    else
      still+=("$r")
    fi
  done
  running=(${still[@]+"${still[@]}"})
}
for h in "${HARNESSES[@]}"; do
  rm -f "$BUILD/fuzz-$h.status"
  fuzz_one "$h" &
  running+=("$h")
  while [ ${#running[@]} -ge "$JOBS" ]; do
    wait -n || true
    collect_finished
  done
done
wait
collect_finished
if [ "$findings" -ne 0 ]; then
  echo "fuzz: $findings harness(es) reported a finding; inputs in $BUILD/crash-*" >&2
  exit 1
fi
