#!/usr/bin/env bash
# The performance benchmark (docs/PERFORMANCE.md), on this machine, unattended:
# installs what is missing, builds (Release-like, RelWithDebInfo), starts a local
# redis-server and the development Kafka (librdkafka's mock cluster), then
# measures and prints a table and one JSON line:
#   - drain: N preloaded events consumed from the start (events/s, Redis
#     commands/s, daemon CPU s per million events, peak RSS), bitfield and setbit;
#   - the Redis ceiling of the same run: `exposure-filter bench-redis`, the same
#     write pattern with no Kafka and no decoding;
#   - freshness: loadgen at 50% and 90% of the drain rate for a fixed time,
#     p50/p99/max end-to-end latency from the daemon's histogram;
#   - drain / ceiling.
# Options (all optional):
#   --no-build          use the existing build/exposure-filter
#   --events N          events to preload (default 2000000)
#   --partitions P      partitions of the topic (default 32: the mock keeps ~5 MiB each)
#   --fresh-seconds S   length of each freshness run (default 30)
#   --cluster N         instead: the drain only, against the one redis-server and
#                       then against a local Redis Cluster of N masters (events/s,
#                       Redis CPU s per million events in all and per node)
#   --write-modes       instead: the drain once per redis.write_mode (bitfield,
#                       bitop, module, setbit) into one redis-server that loads the
#                       module (build/redis-module/ef_redis.so): events/s and Redis
#                       CPU s per million events, in one run
#     --modes LIST      only these modes (comma-separated; bitfield always runs)
#     --layout-versions LIST  each mode once per filter.layout_version in LIST
#                       (default 3; 3,4: layout v4 against v3 in one run, each
#                       mode's versions one after the other)
#     --thresholds LIST also bitop at each redis.bitop_threshold in LIST
#     --profile         also perf-record redis-server and the daemon per drain
#                       (also with --near-duplicates)
#   --near-duplicates   instead: the drain with filter.near_duplicates off and on
#                       (warm cache: content.cache_items above the mix's items;
#                       each drain measured over its second half, the first warms up),
#                       alternated, module write mode, over --nd-items items
#                       (default 200000) whose content map is filled first (2 in
#                       10 items join a cluster: their token is written); issue
#                       31's target: on >= 85% of off
#     --nd-pairs N      off/on pairs (default 2; medians reported)
#   --zipf Z            Zipf exponent of users and items (default 1)
#   --tls               Redis over TLS (with the default run, --write-modes or
#                       --near-duplicates; not --cluster): redis-server also
#                       listens on a --tls-port with a CA and a certificate made
#                       with openssl in the run directory, and the daemon and
#                       bench-redis connect to rediss://127.0.0.1:PORT with
#                       redis.tls.ca_file; everything else is identical, so the
#                       figures compare with a run without it (CPU per million
#                       events: docs/PERFORMANCE.md "Redis over TLS: what it costs")
#   --out FILE          also write the JSON line to FILE
#   --content           instead: the content fingerprint (docs/CONTENT.md; no Redis,
#                       no Kafka): precision and recall on the fortunes corpus
#                       (build/ef_content_corpus) and fingerprint throughput in MB/s
#                       per core (build/ef_microbench --benchmark_filter=Content)
# Everything it starts is stopped on exit; logs stay in the run directory it prints.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=1
CONTENT=0
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --content) CONTENT=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
if [ "$CONTENT" = 1 ]; then
  BUILD_DIR=${BUILD_DIR:-build}
  if [ "$BUILD" = 1 ]; then
    scripts/install-deps.sh
    cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
      -DEF_BUILD_TESTS=ON -DEF_BUILD_BENCH=ON >/dev/null
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target ef_content_corpus ef_microbench
  fi
  "$BUILD_DIR/ef_content_corpus"
  echo
  exec "$BUILD_DIR/ef_microbench" --benchmark_filter=Content --benchmark_min_time=1
fi
if [ "$BUILD" = 1 ]; then
  scripts/install-deps.sh
  scripts/build.sh
fi
EF=${EF:-$PWD/build/exposure-filter}
[ -x "$EF" ] || { echo "bench: $EF not built (drop --no-build)" >&2; exit 1; }
MODULE=${EF_REDIS_MODULE:-$(dirname "$EF")/redis-module/ef_redis.so}
exec python3 scripts/bench.py --binary "$EF" --module "$MODULE" "${ARGS[@]}"
