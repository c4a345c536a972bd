#!/usr/bin/env bash
# Installs what trainsim needs from Debian 12 packages (only what is missing; safe to run again) and configures
# and builds it. Usage: tools/scripts/setup.sh [BUILD_DIR] [CMAKE_BUILD_TYPE] [extra cmake args...]
# With CXX=clang++-14 (the sanitizer + fuzzing build of run_tests.sh) it also installs clang-14 and libFuzzer
# (libclang-rt-14-dev). SETUP_TARGETS="T1 T2 ..." builds only those targets instead of everything.
set -euo pipefail
cd "$(dirname "$0")/../.."

PACKAGES=(g++ cmake ninja-build libboost-graph-dev libboost-program-options-dev libeigen3-dev nlohmann-json3-dev
          libfmt-dev doctest-dev libbenchmark-dev python3 python3-dev pybind11-dev libtomlplusplus-dev
          libboost-mpi-dev libopenmpi-dev openmpi-bin chromium)
if [ "${CXX:-}" = clang++-14 ]; then PACKAGES+=(clang-14 libclang-rt-14-dev); fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >&2 || true
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

BUILD_DIR="${1:-build}"
BUILD_TYPE="${2:-Release}"
shift $(( $# > 2 ? 2 : $# ))
# trainsim-calibrate needs nvcc (CUDA toolkit, with cuBLASLt and NCCL): name the usual install when it is not
# on PATH; without CUDA the rest builds as before.
CUDA_ARGS=()
if ! command -v nvcc >/dev/null 2>&1 && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  CUDA_ARGS=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${CUDA_ARGS[@]}" "$@" >&2
TARGETS=()
for t in ${SETUP_TARGETS:-}; do TARGETS+=(-t "$t"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${TARGETS[@]}" >&2
