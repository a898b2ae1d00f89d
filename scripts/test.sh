#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit + integration +
# quickstart smoke) with ctest. Integration tests start their own redis-server
# on free ports and librdkafka mock clusters; nothing else is needed.
#   scripts/test.sh                 all tests
#   scripts/test.sh -L unit         only unit tests (any ctest arguments pass through)
#   EF_SANITIZE=1 scripts/test.sh   the same under ASan + UBSan (build-asan/)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ "${EF_SANITIZE:-0}" = 1 ]; then BUILD_DIR=${BUILD_DIR:-build-asan}; else BUILD_DIR=${BUILD_DIR:-build}; fi
cd "$BUILD_DIR"
# Two at a time: each integration test runs its own Redis, broker and daemon.
ctest --output-on-failure --timeout 600 -j2 "$@"
