#!/usr/bin/env bash
# The read-side benchmark (docs/PERFORMANCE.md "Read side"), on this machine,
# unattended: builds (RelWithDebInfo) exposure-filter and ef_read_bench, starts a
# local redis-server and `exposure-filter serve` on free ports, then ef_read_bench:
#   - fills Redis with a realistic filter state (users with exposures in all 31
#     daily buckets of the 30-day window, Zipf activity: heavy users use several
#     stages of layout v2), with the daemon's Coalescer and RedisBitWriter (plus
#     server-side COPYs of written users' keys for most light users: fill ~4 s with the default write mode, ~45 s with bitfield);
#   - the library: one client thread, requests of 1,000 candidates for Zipf users:
#     req/s, p50/p99/p999, client CPU per candidate;
#   - serve over loopback: C keep-alive clients, closed loop, for each C of
#     --threads (its max req/s is the best), then open loop at 50% of that max with
#     that C (latency from the scheduled send time): p50/p99/p999;
#   - mark_served (README "Paged feeds"): the same requests marking the first 50
#     unseen candidates served: the library (FilterAndMark, one thread), then serve
#     ("mark_served": 50) closed loop for each C of --threads and open loop at 50%
#     of that max, each run from empty served rings and with sessions of 10
#     pages (a user's ring deleted after 10 of its requests); its max against serve's max
#     without marks (target >= 80%) and its p99 at 50% (target <= 3 ms); issue 52's:
#     serve CPU per request marked / unmarked (<= 1.2), the p50 the mark adds at
#     50% (<= 0.1 ms), and the delay of marks written after the answer (the
#     window in which a next page can race its mark), from serve's /metrics;
#   - the raw Redis ceiling: one MGET of the same 32 keys per request, closed loop
#     on C connections for each C of --threads (the ceiling is the best);
# and prints a table and one JSON line with the figures and the targets met.
# Options (all optional):
#   --users N       users in the filter state (default 20000)
#   --seconds D     length of each measured phase (default 10)
#   --threads LIST  concurrent HTTP clients / Redis connections of the closed
#                   loops, comma-separated (default 4,8: each side runs with both
#                   and counts its best; serve.threads is raised to the largest)
#   --candidates N  candidates per request (default 1000; 1 shows the fixed cost
#                   of a request: HTTP and the Redis read)
#   --no-build      use the existing build (build/, or $BUILD_DIR)
#   --out FILE      also write the JSON line to FILE
#   --mark N        candidates each mark_served request marks (default 50)
#   --session-pages P  in mark_served, a user's session ends (its served ring
#                   is deleted, as its TTL would) after P of its requests
#                   (default 10: 500 items at 50 a page, the ring's capacity)
#   --phases LIST   run only these of library,serve,mark_served,mget (to profile
#                   one; the targets need all of them)
#   --serve-set K=V a config override for serve (repeatable), e.g.
#                   --serve-set serve.threads=4
#   --near-duplicates  instead (issues 31, 52): serve without clusters
#                   (filter.near_duplicates off), then with it on: with "clusters"
#                   in every request (1 candidate in 5 in a shared cluster), and
#                   with the clusters read from the content map (written first)
#                   through serve's local cache of it, warmed with the requests'
#                   candidates so that it answers --map-hit-rate of the lookups;
#                   serve's and Redis' CPU per request of each (issue 52's
#                   targets: the map's lookups <= 10% of the 1.7 ms of Redis CPU
#                   per request they cost without the cache; serve with the map
#                   <= 1.3 x serve with clusters in the request)
#                   and, with the cache, the map once more from a new serve
#                   whose cache is first filled until each of its generations
#                   has reached its largest table and flipped (ef_read_bench
#                   --map-steady-bytes: a serve that has run a while)
#   --map-hit-rate P  with --near-duplicates: the share of a request's lookups
#                   the cache answers (default 0.95: 50 of 1,000 candidates of
#                   each request sent are fresh items, indexed in the map)
#   --new-pool N    draw the never-exposed candidates of the requests from N
#                   items (default 0: each one new, so 2,000 requests hold
#                   about 1.8M distinct candidates)
#   --content-cache-bytes N  with --near-duplicates: serve.content_cache_bytes
#                   of the serve with it on (default 536870912: the requests'
#                   1.8M distinct candidates fit); not set for a serve that
#                   does not know the key (a build before issue 52: EF=...)
#   --idle          instead (issue 49): serve with serve.threads 8 (unless
#                   --serve-set), --active C connections (default 16) alone, then
#                   with --idle-conns N (default 2000) idle keep-alive connections
#                   open: closed loop, then open loop at 50% of the max alone
#                   (ABBA); /readyz probed every 20 ms on a new connection
#                   throughout. Targets: the idle connections stay open, the
#                   active p99 at 50% with them <= 1.10 x alone, /readyz p99 < 10 ms
#   --combinations  instead (issue 52, target 5): each feature combination, from
#                   an empty Redis each: the library (one thread) and serve, each
#                   without and with "mark_served", for filter.near_duplicates
#                   off, then on with clusters in the request, then on with the
#                   clusters from the content map (through the caches, as
#                   --near-duplicates): serve's, Redis' and the library's CPU per
#                   request of each, and what one Redis core serves (1 s / Redis
#                   CPU per request)
#   --tls           instead: serve's cost of Redis over TLS: one redis-server
#                   with a plain --port and a --tls-port (a CA and a certificate
#                   made with openssl in the run directory), filled over the plain
#                   port; the serve phase with serve connected over plain TCP, then
#                   with serve restarted connected over TLS (rediss://, its
#                   redis.tls.ca_file): max req/s, p99 at the max and at 50% of
#                   it, serve's and Redis' CPU per request, TLS against plain
# Everything it starts is stopped on exit; logs stay in the run directory it prints.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=1
USERS=20000
SECONDS_=10
THREADS=4,8
OUT=()
PHASES=()
CANDIDATES=()
MARK=()
SERVE_SETS=()
NEAR=0
COMBOS=0
IDLE=0
IDLE_ARGS=()
TLS=0
MAP_HIT_RATE=0.95
CACHE_BYTES=536870912
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --users) USERS=$2; shift ;;
    --seconds) SECONDS_=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --out) OUT=(--out "$2"); shift ;;
    --phases) PHASES=(--phases "$2"); shift ;;
    --candidates) CANDIDATES=(--candidates "$2"); shift ;;
    --mark) MARK+=(--mark "$2"); shift ;;
    --session-pages) MARK+=(--session-pages "$2"); shift ;;
    --serve-set) SERVE_SETS+=(--set "$2"); shift ;;
    --near-duplicates) NEAR=1 ;;
    --combinations) COMBOS=1 ;;
    --idle) IDLE=1 ;;
    --idle-conns) IDLE_ARGS+=(--idle-conns "$2"); shift ;;
    --active) IDLE_ARGS+=(--active "$2"); shift ;;
    --tls) TLS=1 ;;
    --map-hit-rate) MAP_HIT_RATE=$2; shift ;;
    --content-cache-bytes) CACHE_BYTES=$2; shift ;;
    --new-pool) CANDIDATES+=(--new-pool "$2"); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0"; exit 0 ;;
    *) echo "bench-read: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$TLS" = 1 ] && { [ "$NEAR" = 1 ] || [ ${#PHASES[@]} -gt 0 ]; }; then
  echo "bench-read: --tls runs the serve phase alone (no --near-duplicates, --phases)" >&2
  exit 2
fi
if [ "$COMBOS" = 1 ] && { [ "$NEAR" = 1 ] || [ "$TLS" = 1 ] || [ ${#PHASES[@]} -gt 0 ]; }; then
  echo "bench-read: --combinations runs its own phases (no --near-duplicates, --tls, --phases)" >&2
  exit 2
fi
[[ $THREADS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
  { echo "bench-read: --threads $THREADS: expected counts like 4 or 4,8" >&2; exit 2; }
BUILD_DIR=${BUILD_DIR:-build}
if [ "$BUILD" = 1 ]; then
  scripts/install-deps.sh
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target exposure-filter ef_read_bench
fi
EF=${EF:-$PWD/$BUILD_DIR/exposure-filter}
BENCH=${EF_READ_BENCH:-$PWD/$BUILD_DIR/ef_read_bench}
for b in "$EF" "$BENCH"; do
  [ -x "$b" ] || { echo "bench-read: $b not built (drop --no-build)" >&2; exit 1; }
done

RUN_DIR=$(mktemp -d /tmp/ef-bench-read.XXXXXX)
echo "bench-read: run directory $RUN_DIR" >&2
NAME=bench-read
. scripts/lib.sh
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

REDIS_PORT=$(free_port)
REDIS_TLS_ARGS=()
if [ "$TLS" = 1 ]; then
  # --tls: a private CA and a certificate for 127.0.0.1 that it signed (EC P-256,
  # the openssl commands of tests/support/tls_certs.cc); the same server also
  # listens with TLS.
  TLS_DIR=$RUN_DIR/tls
  mkdir -p "$TLS_DIR"
  EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  {
    openssl req -x509 -new "${EC[@]}" -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.pem" -days 2 \
      -subj "/CN=ef bench CA" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign"
    printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=CA:FALSE" \
      "keyUsage=critical,digitalSignature,keyAgreement" "extendedKeyUsage=serverAuth" \
      >"$TLS_DIR/server.ext"
    openssl req -new "${EC[@]}" -keyout "$TLS_DIR/server.key" -out "$TLS_DIR/server.csr" \
      -subj "/CN=localhost"
    openssl x509 -req -in "$TLS_DIR/server.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca.key" \
      -set_serial 1 -days 2 -out "$TLS_DIR/server.pem" -extfile "$TLS_DIR/server.ext"
  } >"$TLS_DIR/openssl.log" 2>&1 ||
    { echo "bench-read: making the TLS certificates failed ($TLS_DIR/openssl.log)" >&2; exit 1; }
  REDIS_TLS_PORT=$(free_port)
  REDIS_TLS_ARGS=(--tls-port "$REDIS_TLS_PORT" --tls-cert-file "$TLS_DIR/server.pem"
    --tls-key-file "$TLS_DIR/server.key" --tls-ca-cert-file "$TLS_DIR/ca.pem"
    --tls-auth-clients no)
fi
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
  --logfile "$RUN_DIR/redis.log" "${REDIS_TLS_ARGS[@]}" &
PIDS+=($!)
wait_for 10 "redis-server" redis-cli -p "$REDIS_PORT" ping

# serve checks the stored layout at start: store it first.
"$BENCH" --redis "127.0.0.1:$REDIS_PORT" --meta-only >"$RUN_DIR/meta.log" 2>&1 ||
  { echo "bench-read: storing the layout failed ($RUN_DIR/meta.log)" >&2; exit 1; }

# As many workers as the most client connections of the closed loops (at least
# 8, the default), so that each side runs with its best concurrency. The idle
# phase keeps the default: thousands of connections on 8 workers.
MAX_CONNS=$(tr ',' '\n' <<<"$THREADS" | sort -n | tail -1)
SERVE_THREADS=$(( MAX_CONNS > 8 ? MAX_CONNS : 8 ))
[ "$IDLE" = 1 ] && SERVE_THREADS=8
# start_serve LOG [--set K=V...]: a serve on a new port (SERVE_PORT, SERVE_PID).
start_serve() {
  local log=$1
  shift
  SERVE_PORT=$(free_port)
  "$EF" serve --set "serve.listen=127.0.0.1:$SERVE_PORT" --set "redis.address=127.0.0.1:$REDIS_PORT" \
    --set "serve.threads=$SERVE_THREADS" "${SERVE_SETS[@]}" "$@" >"$RUN_DIR/$log" 2>&1 &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  wait_for 10 "serve" curl -sf "http://127.0.0.1:$SERVE_PORT/healthz"
}
# Each run fills Redis anew: from empty, so that every phase reads the same state
# (a fill on top of an earlier one writes the same items again, and heavy users'
# keys grow stages: before 2026-12-03 the later phases read fuller filters).
refill_from_empty() {
  redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null
  "$BENCH" --redis "127.0.0.1:$REDIS_PORT" --meta-only >>"$RUN_DIR/meta.log" 2>&1
}
# The serve.content_cache_bytes setting of a serve with filter.near_duplicates
# (none for a build before issue 52, which does not know the key).
cache_set() {
  CACHE_SET=()
  if "$EF" config check --set "serve.content_cache_bytes=$CACHE_BYTES" >/dev/null 2>&1; then
    CACHE_SET=(--set "serve.content_cache_bytes=$CACHE_BYTES")
  else
    echo "bench-read: $EF has no serve.content_cache_bytes: the map read without a cache" >&2
  fi
}
# run_bench ARGS...: ef_read_bench against the current serve, in the background
# so that a signal runs the trap (and stops it) at once.
run_bench() {
  "$BENCH" --redis "127.0.0.1:$REDIS_PORT" --serve "127.0.0.1:$SERVE_PORT" --serve-pid "$SERVE_PID" \
    --users "$USERS" --seconds "$SECONDS_" --threads "$THREADS" "${CANDIDATES[@]}" "$@" &
  BENCH_PID=$!
  PIDS=("$BENCH_PID" "${PIDS[@]}")
  wait "$BENCH_PID"
}

start_serve serve.log
if [ "$IDLE" = 1 ]; then
  run_bench --phases idle "${IDLE_ARGS[@]}" "${OUT[@]}"
  exit 0
fi
if [ "$TLS" = 1 ]; then
  # --tls: the serve phase with serve on plain TCP, then with a serve on TLS to
  # the same redis-server (each run fills it anew over the plain port, as every
  # ef_read_bench run does: the same state both times).
  run_bench --phases serve --out "$RUN_DIR/tls-plain.json"
  kill "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
  start_serve serve-tls.log --set "redis.address=rediss://127.0.0.1:$REDIS_TLS_PORT" \
    --set "redis.tls.ca_file=$TLS_DIR/ca.pem"
  run_bench --phases serve --out "$RUN_DIR/tls-tls.json"
  python3 - "$RUN_DIR" "${OUT[@]}" <<'PY'
import json, sys
d = sys.argv[1]
runs = {k: json.load(open(f"{d}/tls-{k}.json")) for k in ("plain", "tls")}
def fig(r):
    m, h = r["serve_max"], r["serve_half"]
    return {"max_rps": m["rps"], "max_p99_ms": m["p99_ms"], "connections": m["connections"],
            "half_rps": h["rps"], "half_p50_ms": h["p50_ms"], "half_p99_ms": h["p99_ms"],
            "serve_cpu_us_per_request": m["cpu_us_per_request"]["serve"],
            "redis_cpu_us_per_request": m["cpu_us_per_request"]["redis"],
            "serve_cpu_us_per_request_half": h["cpu_us_per_request"]["serve"],
            "redis_cpu_us_per_request_half": h["cpu_us_per_request"]["redis"],
            "errors": m["errors"] + h["errors"], "cpu_steal": max(m["cpu_steal"], h["cpu_steal"])}
f = {k: fig(r) for k, r in runs.items()}
def ratio(key):
    return round(f["tls"][key] / f["plain"][key], 3) if f["plain"][key] else None
out = {"bench": "exposure-filter-read-tls", "users": runs["plain"]["users"],
       "candidates": runs["plain"]["candidates"], "seconds": runs["plain"]["seconds"],
       "plain": f["plain"], "tls": f["tls"],
       "tls_vs_plain": {k: ratio(k) for k in ("max_rps", "serve_cpu_us_per_request",
                                              "redis_cpu_us_per_request", "half_p99_ms")}}
print(f"serve, {out['candidates']} candidates a request: Redis over plain TCP, then over TLS")
print(f"  {'':<6} {'max req/s':>10} {'p99 ms':>7} {'50%: p50 ms':>12} {'p99 ms':>7} "
      f"{'serve cpu us/req':>17} {'redis cpu us/req':>17} {'errors':>7}")
for k in ("plain", "tls"):
    x = f[k]
    print(f"  {k:<6} {x['max_rps']:>10.0f} {x['max_p99_ms']:>7.3f} {x['half_p50_ms']:>12.3f} "
          f"{x['half_p99_ms']:>7.3f} {x['serve_cpu_us_per_request']:>17.1f} "
          f"{x['redis_cpu_us_per_request']:>17.1f} {x['errors']:>7}")
r = out["tls_vs_plain"]
print(f"  tls/plain: max req/s {r['max_rps']}, serve cpu per request "
      f"{r['serve_cpu_us_per_request']}, redis cpu per request {r['redis_cpu_us_per_request']}, "
      f"p99 at 50% {r['half_p99_ms']} (CPU per request at the max)")
print(json.dumps(out))
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(json.dumps(out) + "\n")
PY
  exit 0
fi
if [ "$COMBOS" = 1 ]; then
  ALL=(--phases library,serve,mark_served "${MARK[@]}")
  run_bench "${ALL[@]}" --out "$RUN_DIR/combo-off.json"
  kill "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
  refill_from_empty
  cache_set
  start_serve serve-nd.log --set filter.near_duplicates=true "${CACHE_SET[@]}"
  run_bench "${ALL[@]}" --clusters given --out "$RUN_DIR/combo-given.json"
  refill_from_empty
  run_bench "${ALL[@]}" --clusters map --map-hit-rate "$MAP_HIT_RATE" \
    --out "$RUN_DIR/combo-map.json"
  python3 - "$RUN_DIR" "${OUT[@]}" <<'PY'
import json, sys
d = sys.argv[1]
runs = {k: json.load(open(f"{d}/combo-{k}.json")) for k in ("off", "given", "map")}
names = {"off": "near_duplicates off", "given": "clusters in the request",
         "map": "clusters from the map"}
def hit_rate(phase):
    c = phase.get("cluster_cache")
    return c["hit_rate"] if c and c["hits"] + c["misses"] > 0 else None
rows = []
for k, r in runs.items():
    for mark in (False, True):
        s = r["serve_mark_max" if mark else "serve_max"]
        lib = r["library_mark" if mark else "library"]
        redis_us = s["cpu_us_per_request"]["redis"]
        rows.append({
            "combination": names[k] + (", mark_served" if mark else ""),
            "serve_cpu_us": s["cpu_us_per_request"]["serve"],
            "redis_cpu_us": redis_us,
            "redis_rps_per_core": round(1e6 / redis_us) if redis_us else None,
            "serve_rps": s["rps"],
            "library_cpu_us": round(lib["cpu_us_per_candidate"] * r["candidates"], 1),
            "library_redis_cpu_us": lib["cpu_us_per_request"]["redis"],
            "cpu_steal": max(s["cpu_steal"], lib["cpu_steal"]),
            # the content cache's share of the lookups (None: no lookups, or a
            # build without the cache)
            "serve_cache_hit_rate": hit_rate(s),
            "library_cache_hit_rate": hit_rate(lib),
        })
pct = lambda h: "-" if h is None else f"{100 * h:.1f}%"
print(f"CPU per request (1,000 candidates) at serve's maximum and in the library's one thread:")
print(f"  {'':<44} {'serve us':>9} {'redis us':>9} {'req/s per':>10} {'library us':>11} "
      f"{'redis us':>9} {'cache hits':>10} {'cache hits':>10}")
print(f"  {'':<44} {'':>9} {'(serve)':>9} {'redis core':>10} {'':>11} {'(library)':>9} "
      f"{'(serve)':>10} {'(library)':>10}")
for x in rows:
    print(f"  {x['combination']:<44} {x['serve_cpu_us']:>9.1f} {x['redis_cpu_us']:>9.1f} "
          f"{x['redis_rps_per_core'] or 0:>10} {x['library_cpu_us']:>11.1f} "
          f"{x['library_redis_cpu_us']:>9.1f} {pct(x['serve_cache_hit_rate']):>10} "
          f"{pct(x['library_cache_hit_rate']):>10}")
out = {"bench": "exposure-filter-read-combinations", "users": runs["off"]["users"],
       "candidates": runs["off"]["candidates"], "seconds": runs["off"]["seconds"],
       "combinations": rows}
print(json.dumps(out))
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(json.dumps(out) + "\n")
PY
  exit 0
fi
if [ "$NEAR" = 0 ]; then
  run_bench "${OUT[@]}" "${PHASES[@]}" "${MARK[@]}"
  exit 0
fi
# --near-duplicates: serve without clusters (filter.near_duplicates off), then a
# serve with it on: clusters in the requests, then from the content map (through
# serve's cache of it, where the build has one).
run_bench --phases serve --out "$RUN_DIR/nd-off.json"
kill "$SERVE_PID"
wait "$SERVE_PID" 2>/dev/null || true
refill_from_empty
cache_set
start_serve serve-nd.log --set filter.near_duplicates=true "${CACHE_SET[@]}"
run_bench --phases serve --clusters given --out "$RUN_DIR/nd-given.json"
refill_from_empty
run_bench --phases serve --clusters map --map-hit-rate "$MAP_HIT_RATE" --out "$RUN_DIR/nd-map.json"
if [ ${#CACHE_SET[@]} -gt 0 ] && awk -v p="$MAP_HIT_RATE" 'BEGIN { exit !(p < 1) }'; then
  # The map again, from a new serve whose cache is first filled until every
  # generation has reached its largest table and flipped (ef_read_bench
  # --map-steady-bytes): what a serve that has run a while pays, not one whose
  # tables still grow. Fresh items fill it: none with --map-hit-rate 1.
  kill "$SERVE_PID"
  wait "$SERVE_PID" 2>/dev/null || true
  refill_from_empty
  start_serve serve-nd-steady.log --set filter.near_duplicates=true "${CACHE_SET[@]}"
  run_bench --phases serve --clusters map --map-hit-rate "$MAP_HIT_RATE" \
    --map-steady-bytes "$CACHE_BYTES" --out "$RUN_DIR/nd-steady.json"
fi
python3 - "$RUN_DIR" "${OUT[@]}" <<'PY'
import json, os, sys
d = sys.argv[1]
phases = ("off", "given", "map") + (("steady",) if os.path.exists(f"{d}/nd-steady.json") else ())
runs = {k: json.load(open(f"{d}/nd-{k}.json")) for k in phases}
r = {k: v["serve_max"] for k, v in runs.items()}
h = {k: v["serve_half"] for k, v in runs.items()}
cpu = lambda p, who: p["cpu_us_per_request"][who]
out = {"bench": "exposure-filter-read-near-duplicates",
       "serve_max_rps": {k: v["rps"] for k, v in r.items()},
       "serve_max_p99_ms": {k: v["p99_ms"] for k, v in r.items()},
       "given_vs_off": round(r["given"]["rps"] / r["off"]["rps"], 3),
       "map_vs_off": round(r["map"]["rps"] / r["off"]["rps"], 3),
       "serve_cpu_us_per_request": {k: cpu(v, "serve") for k, v in r.items()},
       "redis_cpu_us_per_request": {k: cpu(v, "redis") for k, v in r.items()},
       "serve_cpu_us_per_request_half": {k: cpu(v, "serve") for k, v in h.items()},
       "redis_cpu_us_per_request_half": {k: cpu(v, "redis") for k, v in h.items()},
       "map_cache": r["map"].get("cluster_cache"),
       "map_cache_half": h["map"].get("cluster_cache")}
# The map's lookups: Redis CPU per request with the map less with clusters given
# (the same users' MGETs); serve with the map against serve with clusters given.
# "steady": the same with a cache filled until its generations flipped.
def figures(p):
    f = {"map_lookups_redis_cpu_us": round(cpu(p["map"], "redis") - cpu(p["given"], "redis"), 1),
         "serve_map_vs_given": round(cpu(p["map"], "serve") / cpu(p["given"], "serve"), 3)
         if cpu(p["given"], "serve") else None}
    if "steady" in p:
        f["steady_lookups_redis_cpu_us"] = round(cpu(p["steady"], "redis") - cpu(p["given"], "redis"), 1)
        f["serve_steady_vs_given"] = (round(cpu(p["steady"], "serve") / cpu(p["given"], "serve"), 3)
                                      if cpu(p["given"], "serve") else None)
    return f
out["at_max"] = figures(r)
out["at_half"] = figures(h)
if "steady" in r:
    out["steady_cache"] = r["steady"].get("cluster_cache")
out["targets"] = {"given_at_least_85pct_of_off": out["given_vs_off"] >= 0.85,
                  "map_lookups_redis_cpu_le_170us": out["at_max"]["map_lookups_redis_cpu_us"] <= 170,
                  "serve_map_le_1_3x_given": (out["at_max"]["serve_map_vs_given"] or 9) <= 1.3}
if "steady" in r:
    out["targets"]["serve_steady_le_1_3x_given"] = (out["at_max"]["serve_steady_vs_given"] or 9) <= 1.3
print(f"serve, {runs['off']['candidates']} candidates a request:")
print(f"  {'':<28} {'max req/s':>10} {'serve us/req':>13} {'redis us/req':>13} "
      f"{'50%: serve':>11} {'redis':>7} {'cache hits':>11}")
names = {"off": "near_duplicates off", "given": "clusters in the request",
         "map": "clusters from the map", "steady": "the map, cache flipped"}
for k in phases:
    c = r[k].get("cluster_cache")
    hits = f"{100 * c['hit_rate']:.1f}%" if c else "-"
    print(f"  {names[k]:<28} {r[k]['rps']:>10.0f} {cpu(r[k], 'serve'):>13.1f} "
          f"{cpu(r[k], 'redis'):>13.1f} {cpu(h[k], 'serve'):>11.1f} {cpu(h[k], 'redis'):>7.1f} "
          f"{hits:>11}")
for at in ("at_max", "at_half"):
    f = out[at]
    print(f"  {at.replace('_', ' ')}: the map's lookups cost Redis {f['map_lookups_redis_cpu_us']} us "
          f"a request (target <= 170: 10% of 1.7 ms); serve with the map / with clusters given "
          f"{f['serve_map_vs_given']} (target <= 1.3)")
    if "serve_steady_vs_given" in f:
        print(f"  {at.replace('_', ' ')}, cache flipped: the map's lookups cost Redis "
              f"{f['steady_lookups_redis_cpu_us']} us a request; serve with the map / with "
              f"clusters given {f['serve_steady_vs_given']}")
print(json.dumps(out))
if len(sys.argv) > 3:
    open(sys.argv[3], "w").write(json.dumps(out) + "\n")
PY
