#!/usr/bin/env bash
# The quick start, in one command: installs what is missing (scripts/install-deps.sh
# --demo: the build packages and the tools below, no test tools), builds the
# exposure-filter binary alone (scripts/build.sh --binary), then runs the
# whole pipeline on this machine with nothing else to set up:
#   a local redis-server (free port) + the development Kafka (librdkafka's mock
#   cluster) + sample events (loadgen) + three items clustered by content
#   (`content`: a story, its re-post, another story) + the daemon (`run`, with
#   filter.near_duplicates), then shows `check` for a demo user (seen items, and
#   a re-post of a seen story as a near duplicate), and keeps the daemon running
#   until Ctrl-C.
# Everything it started is stopped on exit. Logs stay in the run directory it prints.
#   --no-build     use the existing build/exposure-filter
#   --no-wait      exit after the check instead of waiting for Ctrl-C
#   --events N     sample events to produce (default 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=1 WAIT=1 EVENTS=200000
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --no-wait) WAIT=0 ;;
    --events) EVENTS="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "quickstart: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

T0=$(date +%s)
if [ "$BUILD" = 1 ]; then
  scripts/install-deps.sh --demo
  T1=$(date +%s)
  scripts/build.sh --binary
  T2=$(date +%s)
  echo "quickstart: packages in $((T1 - T0)) s, build in $((T2 - T1)) s"
fi
T2=$(date +%s)
EF=${EF:-$PWD/build/exposure-filter}
[ -x "$EF" ] || { echo "quickstart: $EF not built (drop --no-build)" >&2; exit 1; }

RUN_DIR=$(mktemp -d /tmp/exposure-filter-quickstart.XXXXXX)
PIDS=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "quickstart: stopping (logs in $RUN_DIR)"
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

NAME=quickstart
. scripts/lib.sh

REDIS_PORT=$(free_port)
METRICS_PORT=$(free_port)
echo "quickstart: redis-server on 127.0.0.1:$REDIS_PORT"
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$RUN_DIR" \
  >"$RUN_DIR/redis.log" 2>&1 &
PIDS+=($!)
wait_for 10 "redis-server" redis-cli -p "$REDIS_PORT" ping

echo "quickstart: development Kafka (librdkafka mock cluster), topics 'exposures' and 'items' with 4 partitions"
"$EF" dev-kafka --partitions 4 --topic exposures --topic items --bootstrap-file "$RUN_DIR/bootstrap" \
  >"$RUN_DIR/dev-kafka.log" 2>&1 &
PIDS+=($!)
wait_for 10 "dev-kafka" test -s "$RUN_DIR/bootstrap"
BOOTSTRAP=$(cat "$RUN_DIR/bootstrap")

echo "quickstart: producing $EVENTS sample events (10k users, 3 days of event times) to $BOOTSTRAP"
"$EF" loadgen -b "$BOOTSTRAP" -n "$EVENTS" --users 10000 --items 1000000 --spread 3d \
  --list-fraction 0.1 --list-size 10 --bad-fraction 0.001 -q
NOW_MS=$(($(date +%s) * 1000))
printf '%s\n' \
  "{\"user_id\":\"demo-user\",\"item_id\":\"item-1\",\"ts\":$NOW_MS}" \
  "{\"user_id\":\"demo-user\",\"items\":[\"item-2\",\"item-3\"],\"ts\":$NOW_MS}" \
  "{\"user_id\":\"demo-user\",\"item_id\":\"item-4\",\"ts\":$((NOW_MS - 86400000))}" \
  "{\"user_id\":\"demo-user\",\"item_id\":\"story-1\",\"ts\":$NOW_MS}" \
  | kcat -P -b "$BOOTSTRAP" -t exposures -k demo-user
TOTAL=$((EVENTS + 4))

# Near-duplicate content (docs/CONTENT.md): a story and its re-post under another
# item ID (fingerprints 1 bit apart) and an unrelated story, in the items topic;
# `exposure-filter content` gives the re-post the story's cluster.
echo "quickstart: items topic: story-1, its re-post story-1-repost and story-2; clustering them:"
printf '%s\n' \
  '{"item_id":"story-1","simhash":"5a17c0de2b4e9f31"}' \
  '{"item_id":"story-1-repost","simhash":"5a17c0de2b4e9f33"}' \
  '{"item_id":"story-2","simhash":"a3e8f1427c90d6be"}' \
  | kcat -P -b "$BOOTSTRAP" -t items -k items
"$EF" content -c config/exposure-filter.yaml --set "kafka.bootstrap_servers=$BOOTSTRAP" \
  --set "redis.address=127.0.0.1:$REDIS_PORT" --set metrics.listen= --exit-at-end \
  2>"$RUN_DIR/content.log" || { echo "quickstart: content failed:" >&2; tail -5 "$RUN_DIR/content.log" >&2; exit 1; }
grep -o '3 items assigned.*' "$RUN_DIR/content.log" | head -1 | sed 's/^/  /'

SET=(--set "kafka.bootstrap_servers=$BOOTSTRAP" --set "redis.address=127.0.0.1:$REDIS_PORT"
     --set "metrics.listen=127.0.0.1:$METRICS_PORT" --set filter.near_duplicates=true
     --set "kafka.properties.session.timeout.ms=6000" --set "kafka.properties.fetch.wait.max.ms=10")
echo "quickstart: starting the daemon: exposure-filter run -c config/exposure-filter.yaml ${SET[*]}"
"$EF" run -c config/exposure-filter.yaml "${SET[@]}" >"$RUN_DIR/daemon.log" 2>&1 &
DAEMON=$!
PIDS=("$DAEMON" "${PIDS[@]}")  # stopped first, so it drains and commits

processed() {
  curl -sf "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '/^exposure_filter_events_total\{/ {s += $2} END {printf "%d\n", s}'
}
START=$(date +%s%N)
for i in $(seq 1 1200); do
  kill -0 "$DAEMON" 2>/dev/null || { echo "quickstart: the daemon exited:" >&2; tail -5 "$RUN_DIR/daemon.log" >&2; exit 1; }
  N=$(processed 2>/dev/null) || N=0  # not listening yet (awk printed 0 already)
  [ "${N:-0}" -ge "$TOTAL" ] && break
  if [ -t 1 ]; then
    printf '\rquickstart: daemon processed %s of %s events' "$N" "$TOTAL"
  elif [ $((i % 20)) = 0 ]; then
    echo "quickstart: daemon processed $N of $TOTAL events"
  fi
  sleep 0.1
done
[ -t 1 ] && echo
[ "${N:-0}" -ge "$TOTAL" ] || { echo "quickstart: the daemon did not catch up in 120 s (logs in $RUN_DIR)" >&2; exit 1; }
echo "quickstart: daemon processed $N of $TOTAL events in $(( ($(date +%s%N) - START) / 1000000 )) ms, including the first group join (~3 s)"
echo "quickstart: caught up ($(curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | awk '/^exposure_filter_events_total\{result="rejected"/ {print $2}') bad events rejected and counted)"

echo
echo "quickstart: demo-user saw item-1..item-4; asking which of item-1..item-6 are seen:"
echo "  \$ exposure-filter check --set redis.address=127.0.0.1:$REDIS_PORT -u demo-user item-1 ... item-6"
"$EF" check --set "redis.address=127.0.0.1:$REDIS_PORT" -u demo-user item-1 item-2 item-3 item-4 item-5 item-6
RESULT=$("$EF" check --set "redis.address=127.0.0.1:$REDIS_PORT" -u demo-user --unseen item-1 item-2 item-3 item-4 item-5 item-6)
if [ "$RESULT" != $'item-5\nitem-6' ]; then
  echo "quickstart: FAILED: expected only item-5 and item-6 unseen, got: $RESULT" >&2
  exit 1
fi
echo
echo "quickstart: demo-user also saw story-1; asking about its re-post and story-2:"
echo "  \$ exposure-filter check --set redis.address=127.0.0.1:$REDIS_PORT --set filter.near_duplicates=true -u demo-user story-1-repost story-2"
"$EF" check --set "redis.address=127.0.0.1:$REDIS_PORT" --set filter.near_duplicates=true \
  -u demo-user story-1-repost story-2
RESULT=$("$EF" check --set "redis.address=127.0.0.1:$REDIS_PORT" --set filter.near_duplicates=true \
  -u demo-user --unseen story-1-repost story-2)
if [ "$RESULT" != "story-2" ]; then
  echo "quickstart: FAILED: expected only story-2 unseen (story-1-repost a near duplicate), got: $RESULT" >&2
  exit 1
fi
echo "quickstart: OK: seen items and re-posts of seen stories are filtered, unseen ones pass (demo in $(($(date +%s) - T2)) s)"

if [ "$WAIT" = 1 ]; then
  cat <<MSG

The stack keeps running. Try, in another terminal:
  export BOOTSTRAP=$BOOTSTRAP REDIS=127.0.0.1:$REDIS_PORT   # README's "Example: one event, one query"
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep ^exposure_filter_
  $EF loadgen -b $BOOTSTRAP -n 100000 --rate 20000
  $EF check --set redis.address=127.0.0.1:$REDIS_PORT -u demo-user item-1 item-9
  redis-cli -p $REDIS_PORT --scan --pattern 'ef:{demo-user}*'
Daemon log: $RUN_DIR/daemon.log.  Ctrl-C stops everything.
MSG
  wait "$DAEMON" || true
fi
