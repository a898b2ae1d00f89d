#!/usr/bin/env bash
# Configures and builds exposure-filter into build/ (or $BUILD_DIR).
#   scripts/build.sh [CMAKE_ARGS...]           everything: the binary, the client
#                                              library, the Redis module, tests and
#                                              benchmarks (Catch2 and Google Benchmark
#                                              required: scripts/install-deps.sh)
#   scripts/build.sh --binary [CMAKE_ARGS...]  only the exposure-filter binary
#                                              (scripts/install-deps.sh --build is
#                                              enough; the quick start and the image);
#                                              a new build directory is Release (-O3,
#                                              no debug info: compiles faster)
#   EF_SANITIZE=1 scripts/build.sh             ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=()
OPTIONAL=(-DEF_BUILD_TESTS=ON -DEF_BUILD_BENCH=ON)
case "${1:-}" in
  --binary)
    # Tests and benchmarks stay as configured (AUTO on a new build directory):
    # configuring never needs their packages, and only the binary is compiled.
    TARGET=(--target exposure-filter)
    OPTIONAL=()
    NEW_BUILD_TYPE=Release
    shift
    ;;
  -h | --help)
    sed -n '2,12p' "$0"
    exit 0
    ;;
esac
if [ "${EF_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=${BUILD_DIR:-build-asan}
  EXTRA=(-DEF_SANITIZE=ON)
else
  BUILD_DIR=${BUILD_DIR:-build}
  EXTRA=()
fi
if [ -n "${NEW_BUILD_TYPE:-}" ] && [ -z "${BUILD_TYPE:-}" ] && [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  # --binary on a configured directory keeps its build type (no full rebuild).
  BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
fi
BUILD_TYPE=${BUILD_TYPE:-${NEW_BUILD_TYPE:-RelWithDebInfo}}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${OPTIONAL[@]}" "${EXTRA[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" "${TARGET[@]}"
echo "build: $BUILD_DIR/exposure-filter"
