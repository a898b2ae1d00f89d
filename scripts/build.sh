#!/usr/bin/env bash
# Configures and builds exposure-filter into build/ (or $BUILD_DIR).
#   scripts/build.sh [CMAKE_ARGS...]           everything: the binary, the client
#                                              library, the Redis module, tests and
#                                              benchmarks (Catch2 and Google Benchmark
#                                              required: scripts/install-deps.sh)
#   scripts/build.sh --binary [CMAKE_ARGS...]  only the exposure-filter binary
#                                              (scripts/install-deps.sh --build is
#                                              enough; the quick start and the image)
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
    shift
    ;;
  -h | --help)
    sed -n '2,10p' "$0"
    exit 0
    ;;
esac
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
if [ "${EF_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=${BUILD_DIR:-build-asan}
  EXTRA=(-DEF_SANITIZE=ON)
else
  BUILD_DIR=${BUILD_DIR:-build}
  EXTRA=()
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${OPTIONAL[@]}" "${EXTRA[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" "${TARGET[@]}"
echo "build: $BUILD_DIR/exposure-filter"
