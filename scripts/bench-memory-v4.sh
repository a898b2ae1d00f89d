#!/usr/bin/env bash
# Layout v4's memory against v3 (issue 53; docs/CAPACITY.md "Layout v4 on a real
# Redis"), on this machine, unattended: builds (RelWithDebInfo) ef_module_tests and
# the Redis module, then runs its hidden benchmark "[.bench][v4]"
# (tests/module/memory_v4_bench_test.cc), which starts its own redis-servers:
#   - the issue's population (600 users at 0.5x, 250 at 1x, 100 at 4x, 40 at 16x,
#     10 at 64x of items_per_bucket 200; +-10% a day), yesterday then today,
#     written by RedisBitWriter (bitfield) under the default layout as version 3, as
#     version 4, and as version 4 upgraded from 3 (v4_from today: yesterday's keys
#     are version 3's), with activity that persists and with activity shuffled between
#     the days: today's filter bytes (STRLEN) over the Bloom optimum at p_b,
#     MEMORY USAGE, the false-positive rate by activity class over p_b, false
#     negatives (lines "memory-v4: persists|shuffled ...");
#   - the write cost per event of today's events in the bitfield, bitop and module
#     modes, v3 against v4: the writer's thread CPU and Redis's INFO cpu, medians
#     of 5 alternations (lines "memory-v4: write ...").
# Options: --no-build (use the existing build: build/, or $BUILD_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ "${1:-}" != "--no-build" ]]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEF_BUILD_TESTS=ON >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target ef_module_tests ef_redis_module
fi
"$BUILD_DIR/ef_module_tests" "[.bench][v4]" 2>&1 | grep -E "^memory-v4:|passed|failed|FAILED"
