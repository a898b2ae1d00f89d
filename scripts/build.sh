#!/usr/bin/env bash
# Configures and builds exposure-filter into build/ (or $BUILD_DIR).
#   EF_SANITIZE=1 scripts/build.sh   -> ASan + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
if [ "${EF_SANITIZE:-0}" = 1 ]; then
  BUILD_DIR=${BUILD_DIR:-build-asan}
  EXTRA=(-DEF_SANITIZE=ON)
else
  BUILD_DIR=${BUILD_DIR:-build}
  EXTRA=()
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "${EXTRA[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "build: $BUILD_DIR/exposure-filter"
