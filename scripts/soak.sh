#!/usr/bin/env bash
# The soak test (issue 9, docs/RELIABILITY.md): the daemon at a steady rate for a
# given time on this machine, with a rebalance and a Redis restart in the middle;
# reports RSS over time, lag, and false negatives at the end.
#   a local redis-server (AOF on, so a restart keeps the data) + the development
#   Kafka (8 partitions) + loadgen at --rate (Zipf users and items) + probe events
#   (known users and items, 20 a second, mixed into the same topic) + daemon A;
#   at 1/3 of the time daemon B joins the group (rebalance), at 1/2 Redis is
#   restarted (SHUTDOWN, start again on the same port and data), at 2/3 daemon B
#   leaves (SIGTERM). Then production stops, the group must catch up, and every
#   probe exposure is checked with `exposure-filter check`.
# Prints a table of RSS and lag every --sample seconds and a summary with one JSON
# line; exits 1 when a probe is missing (a false negative) or the group does not
# catch up.
#   --minutes M    how long to produce (default 30)
#   --rate R       loadgen events per second (default 2000)
#   --sample S     seconds between RSS/lag samples (default 30)
#   --no-build     use the existing build/exposure-filter
#   --out FILE     also write the JSON line to FILE
# The mock broker scans a partition's stored batches one by one on every fetch, so
# its CPU grows with the number of batches it holds: the producers linger 100 ms
# (bigger batches) and the daemons fetch with fetch.wait.max.ms 100, or at
# 2,000 events/s the mock alone saturates a core after a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=30 RATE=2000 SAMPLE=30 BUILD=1 OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES="$2"; shift ;;
    --rate) RATE="$2"; shift ;;
    --sample) SAMPLE="$2"; shift ;;
    --no-build) BUILD=0 ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "soak: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case "$MINUTES$RATE$SAMPLE" in *[!0-9.]*) echo "soak: --minutes, --rate, --sample take numbers" >&2; exit 2 ;; esac

if [ "$BUILD" = 1 ]; then
  scripts/install-deps.sh
  scripts/build.sh
fi
EF=${EF:-$PWD/build/exposure-filter}
[ -x "$EF" ] || { echo "soak: $EF not built (drop --no-build)" >&2; exit 1; }

RUN_DIR=$(mktemp -d /tmp/exposure-filter-soak.XXXXXX)
declare -A PID
cleanup() {
  trap - EXIT INT TERM
  touch "$RUN_DIR/stop-probes"
  for name in "${!PID[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null || true; done
  for name in "${!PID[@]}"; do wait "${PID[$name]}" 2>/dev/null || true; done
  echo "soak: stopped everything (logs in $RUN_DIR)"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

NAME=soak
. scripts/lib.sh
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo "-"; }

REDIS_PORT=$(free_port)
start_redis() {
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$RUN_DIR" --appendonly yes \
    --appendfsync everysec --save "" >>"$RUN_DIR/redis.log" 2>&1 &
  PID[redis]=$!
  wait_for 30 "redis-server" redis-cli -p "$REDIS_PORT" ping
}
start_redis
"$EF" dev-kafka --partitions 8 --bootstrap-file "$RUN_DIR/bootstrap" >"$RUN_DIR/dev-kafka.log" 2>&1 &
PID[kafka]=$!
wait_for 10 "dev-kafka" test -s "$RUN_DIR/bootstrap"
BOOTSTRAP=$(cat "$RUN_DIR/bootstrap")

CONFIG="$RUN_DIR/ef.yaml"
cat >"$CONFIG" <<EOF
kafka:
  bootstrap_servers: "$BOOTSTRAP"
  group_id: soak
  properties:
    session.timeout.ms: "6000"
    fetch.wait.max.ms: "100"
redis:
  address: "127.0.0.1:$REDIS_PORT"
metrics:
  listen: ""
EOF

start_daemon() {  # start_daemon NAME
  "$EF" run -c "$CONFIG" >"$RUN_DIR/daemon-$1.log" 2>&1 &
  PID[daemon_$1]=$!
}
start_daemon a

SECONDS_TOTAL=$(python3 -c "print(int(float('$MINUTES') * 60))")
EVENTS=$(python3 -c "print(int(float('$RATE') * $SECONDS_TOTAL))")
echo "soak: $MINUTES min at $RATE events/s ($EVENTS events) + 20 probe events/s; logs in $RUN_DIR"
"$EF" loadgen -b "$BOOTSTRAP" -n "$EVENTS" --rate "$RATE" --users 200000 --items 2000000 \
  --list-fraction 0.1 --list-size 10 -X linger.ms=100 -q >"$RUN_DIR/loadgen.log" 2>&1 &
PID[loadgen]=$!

# Probes: 20 known exposures a second for 50 users, kept in probes.txt (user item).
# Stopped by the file stop-probes: the loop ends, kcat sees EOF, flushes and exits.
(
  n=0
  while [ ! -e "$RUN_DIR/stop-probes" ]; do
    now_ms=$(($(date +%s%N) / 1000000))
    for j in $(seq 0 19); do
      user="soak-probe-$(((n + j) % 50))"
      item="probe-$n-$j"
      echo "$user $item" >>"$RUN_DIR/probes.txt"
      printf '%s:{"user_id":"%s","item_id":"%s","ts":%s}\n' "$user" "$user" "$item" "$now_ms"
    done
    n=$((n + 1))
    sleep 1
  done | kcat -P -b "$BOOTSTRAP" -t exposures -K: -X linger.ms=100 2>>"$RUN_DIR/probes.err"
) &
PID[probes]=$!

lag_total() {  # messages not yet committed over all partitions, or "-"
  "$EF" lag -c "$CONFIG" --json --timeout 5s 2>/dev/null | python3 -c '
import json, sys
try:
    doc = json.loads(sys.stdin.readline())
except Exception:
    print("-"); sys.exit()
def walk(o):
    if isinstance(o, dict):
        for k, v in o.items():
            if k == "lag_messages" and isinstance(v, (int, float)): yield v
            else: yield from walk(v)
    elif isinstance(o, list):
        for v in o: yield from walk(v)
print(int(sum(walk(doc))))' 2>/dev/null || echo "-"
}

printf '%8s  %10s  %10s  %12s  %s\n' "t (s)" "rss A MB" "rss B MB" "lag (msgs)" "event" | tee "$RUN_DIR/samples.txt"
START=$(date +%s)
EVENT_AT_B_JOIN=$((SECONDS_TOTAL / 3))
EVENT_AT_REDIS=$((SECONDS_TOTAL / 2))
EVENT_AT_B_LEAVE=$((SECONDS_TOTAL * 2 / 3))
done_b_join=0 done_redis=0 done_b_leave=0 next_sample=0
while :; do
  t=$(($(date +%s) - START))
  [ "$t" -ge "$SECONDS_TOTAL" ] && break
  event=""
  if [ "$done_b_join" = 0 ] && [ "$t" -ge "$EVENT_AT_B_JOIN" ]; then
    start_daemon b; done_b_join=1; event="daemon B joins (rebalance)"
  fi
  if [ "$done_redis" = 0 ] && [ "$t" -ge "$EVENT_AT_REDIS" ]; then
    redis-cli -p "$REDIS_PORT" shutdown >/dev/null 2>&1 || true
    wait "${PID[redis]}" 2>/dev/null || true
    start_redis; done_redis=1; event="redis restarted (AOF kept)"
  fi
  if [ "$done_b_leave" = 0 ] && [ "$t" -ge "$EVENT_AT_B_LEAVE" ]; then
    kill -TERM "${PID[daemon_b]}"; wait "${PID[daemon_b]}" || true; unset 'PID[daemon_b]'
    done_b_leave=1; event="daemon B leaves (SIGTERM)"
  fi
  if [ "$t" -ge "$next_sample" ] || [ -n "$event" ]; then
    kill -0 "${PID[daemon_a]}" 2>/dev/null || { echo "soak: daemon A died (see $RUN_DIR/daemon-a.log)" >&2; exit 1; }
    b="-"; [ -n "${PID[daemon_b]:-}" ] && b=$(rss_mb "${PID[daemon_b]}")
    printf '%8d  %10s  %10s  %12s  %s\n' "$t" "$(rss_mb "${PID[daemon_a]}")" "$b" "$(lag_total)" "$event" \
      | tee -a "$RUN_DIR/samples.txt"
    [ "$t" -ge "$next_sample" ] && next_sample=$((next_sample + SAMPLE))
  fi
  sleep 1
done

touch "$RUN_DIR/stop-probes"
wait "${PID[probes]}" 2>/dev/null || true
kill -TERM "${PID[loadgen]}" 2>/dev/null || true
wait "${PID[loadgen]}" 2>/dev/null || true
unset 'PID[probes]' 'PID[loadgen]'
echo "soak: production stopped; waiting for the group to catch up"
caught_up=0
final_lag="-"
for _ in $(seq 1 120); do
  final_lag=$(lag_total)
  if [ "$final_lag" = 0 ]; then caught_up=1; break; fi
  sleep 1
done
printf '%8d  %10s  %10s  %12s  %s\n' "$(($(date +%s) - START))" "$(rss_mb "${PID[daemon_a]}")" "-" \
  "$final_lag" "caught up: $caught_up" | tee -a "$RUN_DIR/samples.txt"

# Every probe exposure must be seen (false negatives = probes reported unseen).
probes=$(wc -l <"$RUN_DIR/probes.txt")
missing=0
for user in $(cut -d' ' -f1 "$RUN_DIR/probes.txt" | sort -u); do
  n=$(awk -v u="$user" '$1 == u {print $2}' "$RUN_DIR/probes.txt" |
      "$EF" check -c "$CONFIG" -u "$user" --unseen 2>>"$RUN_DIR/check.err" | wc -l)
  missing=$((missing + n))
done

python3 - "$RUN_DIR/samples.txt" "$probes" "$missing" "$caught_up" "$MINUTES" "$RATE" <<'PY' | tee -a "$RUN_DIR/summary.txt"
import json, sys
path, probes, missing, caught_up, minutes, rate = sys.argv[1:]
rows = []
for line in open(path).read().splitlines()[1:]:
    parts = line.split()
    try:
        rows.append((int(parts[0]), float(parts[1])))
    except (ValueError, IndexError):
        pass
warm = [r for t, r in rows if t >= 60] or [r for t, r in rows]
first = warm[0] if warm else 0
result = {
    "soak": "exposure-filter", "minutes": float(minutes), "rate": float(rate),
    "rss_a_mb_after_warmup_first": first, "rss_a_mb_after_warmup_max": max(warm) if warm else 0,
    "rss_a_mb_last": rows[-1][1] if rows else 0,
    "probes": int(probes), "false_negatives": int(missing), "caught_up": caught_up == "1",
}
print(f"soak: RSS of daemon A after warm-up {result['rss_a_mb_after_warmup_first']:.0f} MB, "
      f"max {result['rss_a_mb_after_warmup_max']:.0f} MB, last {result['rss_a_mb_last']:.0f} MB; "
      f"{result['probes']} probe exposures, {result['false_negatives']} false negatives; "
      f"caught up: {result['caught_up']}")
print(json.dumps(result))
PY
[ -n "$OUT" ] && tail -1 "$RUN_DIR/summary.txt" >"$OUT"
[ "$missing" = 0 ] && [ "$caught_up" = 1 ]
