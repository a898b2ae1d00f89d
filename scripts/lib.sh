# Shell helpers of the scripts that start their own redis-server, Kafka and
# daemons (quickstart.sh, soak.sh, bench-read.sh). Sourced from the repository
# root, after the script has set NAME (the prefix of its messages) and RUN_DIR
# (where its logs go).

# A TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_for SECONDS DESCRIPTION COMMAND...: runs COMMAND every 0.1 s until it
# succeeds; after SECONDS, says DESCRIPTION did not come up and exits 1.
wait_for() {
  local secs=$1 what=$2
  shift 2
  for _ in $(seq 1 $((secs * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$NAME: $what did not come up in ${secs}s (logs in $RUN_DIR)" >&2
  exit 1
}
