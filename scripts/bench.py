#!/usr/bin/env python3
"""exposure-filter performance benchmark; run through scripts/bench.sh.

Starts redis-server and the development Kafka, then measures drain throughput,
the Redis ceiling of the same machine, and freshness under load. Prints a table
and one JSON line. Method and figures: docs/PERFORMANCE.md. With --tls every
measured Redis connection (the daemon's, bench-redis') goes over TLS.
"""
import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The event mix of every phase: users Zipf over 1M, items Zipf over 10M, 10% of
# events in list form with 10 items, event times over the last 2 days.
MIX = {"users": 1_000_000, "items": 10_000_000, "list_size": 10, "list_fraction": 0.1,
       "spread": "2d"}
TOPIC = "exposures"
# Every daemon and bench-redis starts from these (later --set win): the main
# bench and --cluster measure BITFIELD, as their earlier figures did, although
# the default redis.write_mode is auto; --write-modes sets each mode.
BASE_SETS = ["redis.write_mode=bitfield"]
# Producer batching of the freshness runs. Part of the measured latency. At 5 ms
# the tiny batches cost loadgen and the mock broker more than a core together on
# a 2-core machine, which starves the daemon and Redis (docs/PERFORMANCE.md).
LINGER_MS = 50
FRESH_TOPICS = {50: "fresh50", 90: "fresh90"}


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


class Profile:
    """`perf record -e cpu-clock` (software clock: works where hardware counters
    do not) on one process for the length of a drain; `top()` is its self time
    by symbol. redis-server is stripped but exports its symbols (for modules),
    so its functions have names."""

    def __init__(self, pid, path):
        self.path = path
        self.proc = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "999",
                                      "-p", str(pid), "-o", path],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     stdin=subprocess.DEVNULL)

    def stop(self, n=15):
        """Stops recording; the n hottest symbols as [percent, dso, symbol]."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            log(f"warning: perf record did not stop; no profile from {self.path}")
            return []
        r = subprocess.run(["perf", "report", "-i", self.path, "--stdio", "--no-children",
                            "--sort", "dso,sym", "--percent-limit", "0.5"],
                           capture_output=True, text=True)
        rows = []
        for line in r.stdout.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.+?)\s*$", line)
            if m:
                rows.append([float(m.group(1)), m.group(2), m.group(3)])
        if not rows:
            log(f"warning: no profile from {self.path} (perf record exit {self.proc.returncode}; "
                f"perf_event_paranoid?): {r.stderr.strip()[-300:]}")
        return rows[:n]


def wait_until(what, timeout, predicate, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise SystemExit(f"bench: {what} did not happen within {timeout} s")


def make_tls_certs(d):
    """A private CA and a certificate for 127.0.0.1 and localhost that it signed
    (EC P-256, the openssl commands of tests/support/tls_certs.cc), in directory
    d: {"ca", "cert", "key"} paths."""
    os.makedirs(d, exist_ok=True)

    def f(name):
        return os.path.join(d, name)

    def openssl(*args):
        r = subprocess.run(["openssl", *args], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"bench: openssl {args[0]} failed: {r.stderr.strip()[-500:]}")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", "-new", *ec, "-keyout", f("ca.key"), "-out", f("ca.pem"),
            "-days", "2", "-subj", "/CN=ef bench CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(f("server.ext"), "w") as out:
        out.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                  "keyUsage=critical,digitalSignature,keyAgreement\n"
                  "extendedKeyUsage=serverAuth\n")
    openssl("req", "-new", *ec, "-keyout", f("server.key"), "-out", f("server.csr"),
            "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", f("server.csr"), "-CA", f("ca.pem"), "-CAkey", f("ca.key"),
            "-set_serial", "1", "-days", "2", "-out", f("server.pem"), "-extfile", f("server.ext"))
    return {"ca": f("ca.pem"), "cert": f("server.pem"), "key": f("server.key")}


class Stack:
    """redis-server + dev-kafka on free ports, stopped on exit. With `tls` the
    redis-server also listens with TLS (a CA and certificate made in the run
    directory) and the measured connections use it (`redis_address`,
    `redis_sets`); its plain port stays for redis-cli (FLUSHALL, INFO) and
    `layout stats`, which are not measured."""

    def __init__(self, binary, run_dir, partitions, module=None, tls=False):
        self.binary = binary
        self.run_dir = run_dir
        self.procs = []
        self.redis_port = free_port()
        self.tls = tls
        tls_args = []
        self.plain_address = f"127.0.0.1:{self.redis_port}"
        self.redis_address, self.redis_sets = self.plain_address, []
        if tls:
            certs = make_tls_certs(os.path.join(run_dir, "tls"))
            self.tls_port = free_port()
            tls_args = ["--tls-port", str(self.tls_port), "--tls-cert-file", certs["cert"],
                        "--tls-key-file", certs["key"], "--tls-ca-cert-file", certs["ca"],
                        "--tls-auth-clients", "no"]
            self.tls_address = f"rediss://127.0.0.1:{self.tls_port}"
            self.tls_sets = [f"redis.tls.ca_file={certs['ca']}"]
            self.redis_address, self.redis_sets = self.tls_address, self.tls_sets
        self.redis = self._start(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", run_dir, *tls_args,
             *(["--loadmodule", module] if module else [])], "redis.log")
        wait_until("redis-server start", 10, lambda: self.redis_cli("PING") == "PONG")
        bootstrap_file = os.path.join(run_dir, "bootstrap")
        self.kafka = self._start(
            [binary, "dev-kafka", "--partitions", str(partitions), "--topic", TOPIC,
             *[arg for t in FRESH_TOPICS.values() for arg in ("--topic", t)],
             "--bootstrap-file", bootstrap_file], "dev-kafka.log")
        wait_until("dev-kafka start", 10,
                   lambda: os.path.exists(bootstrap_file) and os.path.getsize(bootstrap_file) > 0)
        with open(bootstrap_file) as f:
            self.bootstrap = f.read().strip()

    def _start(self, argv, logname):
        out = open(os.path.join(self.run_dir, logname), "w")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def redis_cli(self, *args):
        r = subprocess.run(["redis-cli", "-p", str(self.redis_port), *args],
                           capture_output=True, text=True, timeout=120)
        return r.stdout.strip()

    def redis_commands(self):
        m = re.search(r"total_commands_processed:(\d+)", self.redis_cli("INFO", "stats"))
        return int(m.group(1)) if m else 0

    def flush(self):
        self.redis_cli("FLUSHALL")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


class SingleRedis:
    """The stack's redis-server as a drain target: over TLS if the stack has it
    (`tls` None) or if `tls` is True (a stack started with tls), else plain."""

    def __init__(self, stack, tls=None):
        self.stack = stack
        if stack.tls if tls is None else tls:
            self.address, self.sets = stack.tls_address, list(stack.tls_sets)
        else:
            self.address, self.sets = stack.plain_address, []
        self.nodes = 1

    def flush(self):
        self.stack.flush()

    def cpu(self):
        return [cpu_seconds(self.stack.redis.pid)]

    def commands(self):
        return self.stack.redis_commands()


class LocalCluster:
    """A Redis Cluster of `masters` masters (no replicas) on free ports, for
    --cluster: the same drain against several Redis processes."""

    def __init__(self, stack, masters):
        self.stack = stack
        self.nodes = masters
        self.ports = []
        self.procs = []
        while len(self.ports) < masters:
            p = free_port()
            if p <= 55535 and p not in self.ports:  # the cluster bus port is p + 10000
                self.ports.append(p)
        for p in self.ports:
            d = os.path.join(stack.run_dir, f"cluster-{p}")
            os.makedirs(d, exist_ok=True)
            self.procs.append(stack._start(
                ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", d, "--cluster-enabled", "yes",
                 "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"],
                f"cluster-{p}.log"))
        for p in self.ports:
            wait_until(f"cluster node {p} start", 10, lambda p=p: self.cli(p, "PING") == "PONG")
        r = subprocess.run(["redis-cli", "--cluster", "create",
                            *[f"127.0.0.1:{p}" for p in self.ports], "--cluster-yes"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"bench: redis-cli --cluster create failed: {r.stdout[-500:]}"
                             f"{r.stderr[-500:]}")
        wait_until("cluster state ok", 60, lambda: all(
            "cluster_state:ok" in self.cli(p, "CLUSTER", "INFO") for p in self.ports), 0.1)
        self.address = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        self.sets = [f"redis.address={self.address}", "redis.cluster=true"]

    def cli(self, port, *args):
        r = subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                           timeout=120)
        return r.stdout.strip()

    def flush(self):
        for p in self.ports:
            self.cli(p, "FLUSHALL")

    def cpu(self):
        return [cpu_seconds(proc.pid) for proc in self.procs]

    def commands(self):
        total = 0
        for p in self.ports:
            m = re.search(r"total_commands_processed:(\d+)", self.cli(p, "INFO", "stats"))
            total += int(m.group(1)) if m else 0
        return total


class Daemon:
    """`exposure-filter run` with its /metrics."""

    def __init__(self, stack, name, sets, redis_address=None):
        self.stack = stack
        self.port = free_port()
        argv = [stack.binary, "run",
                "--set", f"kafka.bootstrap_servers={stack.bootstrap}",
                "--set", f"redis.address={redis_address or stack.redis_address}",
                "--set", f"metrics.listen=127.0.0.1:{self.port}",
                "--set", f"kafka.group_id=bench-{name}-{time.time_ns()}",
                "--set", "kafka.properties.session.timeout.ms=6000",
                "--set", "log.level=warn"]
        # redis_address given: the caller's `sets` say how to reach it.
        for s in [*BASE_SETS, *([] if redis_address else stack.redis_sets), *sets]:
            argv += ["--set", s]
        self.log_path = os.path.join(stack.run_dir, f"daemon-{name}.log")
        self.proc = subprocess.Popen(argv, stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        stack.procs.append(self.proc)  # stopped first if the bench fails
        wait_until(f"daemon {name} metrics", 30, lambda: self.metrics() is not None)

    def metrics(self):
        if self.proc.poll() is not None:
            with open(self.log_path) as f:
                tail = f.read()[-2000:]
            raise SystemExit(f"bench: the daemon exited ({self.proc.returncode}):\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
                return parse_metrics(r.read().decode())
        except OSError:
            return None

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def metric_sum(metrics, prefix):
    return sum(v for k, v in metrics.items() if k == prefix or k.startswith(prefix + "{"))


def written(metrics):
    return metrics.get('exposure_filter_events_total{result="written"}', 0.0)


def histogram(metrics, name):
    """[(upper_bound, cumulative_count)] of a histogram, sorted."""
    out = []
    for k, v in metrics.items():
        m = re.fullmatch(re.escape(name) + r'_bucket\{le="([^"]+)"\}', k)
        if m:
            out.append((float("inf") if m.group(1) == "+Inf" else float(m.group(1)), v))
    return sorted(out)


def quantile(buckets, q):
    """histogram_quantile as Prometheus computes it (linear within a bucket)."""
    total = buckets[-1][1] if buckets else 0
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound


def max_bound(buckets):
    """Upper bound of the highest non-empty bucket (the histogram's max)."""
    prev = 0.0
    for bound, count in buckets:
        if count > prev:
            top = bound
        prev = count
    return top if buckets and buckets[-1][1] > 0 else None


def loadgen(stack, topic, n, rate=0.0, extra=()):
    argv = [stack.binary, "loadgen", "-b", stack.bootstrap, "-t", topic, "-n", str(n),
            "--users", str(MIX["users"]), "--items", str(MIX["items"]),
            "--list-size", str(MIX["list_size"]), "--list-fraction", str(MIX["list_fraction"]),
            "-q", *extra]
    if "zipf" in MIX:
        argv += ["--zipf", str(MIX["zipf"])]
    if rate:
        argv += ["--rate", str(rate)]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: loadgen failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def available(stack, topic):
    """Messages the broker holds for `topic` (the mock drops the oldest beyond
    ~5 MiB per partition): the event count of `replay --dry-run` over all of it."""
    r = subprocess.run([stack.binary, "replay", "--dry-run", "--since", "30d", "--topic", topic,
                        "--set", f"kafka.bootstrap_servers={stack.bootstrap}"],
                       capture_output=True, text=True)
    m = re.search(r", (\d+) event\(s\):", r.stderr)
    if r.returncode != 0 or not m:
        raise SystemExit(f"bench: replay --dry-run failed ({r.returncode}): {r.stderr[-500:]}")
    return int(m.group(1))


def machine_ticks():
    """(all, steal) clock ticks of the machine from /proc/stat's "cpu" line: steal is
    the time the hypervisor gave to other guests while this one wanted to run."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    if not fields or fields[0] != "cpu":
        return 0, 0
    v = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(v), (v[7] if len(v) > 7 else 0)


STEAL_WARNING = 0.05  # a drain with more steal than this is flagged


def drain(stack, name, total, sets=(), redis=None, profile=False, prepare=None, warm=0.0):
    """Consumes the preloaded topic from the start; rate from the first to the
    `total`-th event written (the group join is not counted). `redis`: the
    target (SingleRedis, the default, or LocalCluster). `profile`: also the
    hottest symbols of redis-server (one node) and of the daemon while draining."""
    redis = redis or SingleRedis(stack)
    redis.flush()
    if prepare:
        prepare()
    node_cpu0 = redis.cpu()
    kafka_cpu0 = cpu_seconds(stack.kafka.pid)
    cmds0 = redis.commands()
    d = Daemon(stack, name, [f"kafka.topics=[{TOPIC}]", *redis.sets, *sets], redis.address)
    wait_until(f"drain {name}: first event", 60, lambda: written(d.metrics()) > 0, 0.01)
    if warm > 0:  # measured from here: the first `warm` of the events warm the daemon up
        wait_until(f"drain {name}: warm-up", 600, lambda: written(d.metrics()) >= warm * total,
                   0.01)
    t0 = time.monotonic()
    m0 = d.metrics()
    n0, cpu0 = written(m0), cpu_seconds(d.proc.pid)
    ticks0 = machine_ticks()
    last = [n0, time.monotonic()]
    profiles = {}
    if profile:
        profiles = {"redis": Profile(stack.redis.pid, os.path.join(stack.run_dir, f"perf-redis-{name}.data")),
                    "daemon": Profile(d.proc.pid, os.path.join(stack.run_dir, f"perf-daemon-{name}.data"))}

    def done():
        n = written(d.metrics())
        if n != last[0]:
            last[0], last[1] = n, time.monotonic()
        elif time.monotonic() - last[1] > 30:
            raise SystemExit(f"bench: drain {name}: stuck at {n:.0f} of {total} events for 30 s "
                             f"(did the mock broker drop data? see {d.log_path})")
        return n >= total
    try:
        wait_until(f"drain {name}: all {total} events", 1800, done, 0.05)
    except BaseException:
        for p in profiles.values():
            p.stop()
        raise
    t1 = time.monotonic()
    m1 = d.metrics()
    cpu = cpu_seconds(d.proc.pid) - cpu0
    ticks1 = machine_ticks()
    steal = (ticks1[1] - ticks0[1]) / (ticks1[0] - ticks0[0]) if ticks1[0] > ticks0[0] else 0.0
    if steal >= STEAL_WARNING:
        log(f"warning: drain {name}: the hypervisor took {100 * steal:.0f}% of this machine's CPU "
            f"time (steal, /proc/stat): its figures are low")
    rss = peak_rss_kb(d.proc.pid)
    top = {who: p.stop() for who, p in profiles.items()}
    d.stop()
    # Events after the first sample: with very small runs that may be none
    # (everything was written in the first batch): then the rates are 0.
    events = written(m1) - n0
    secs = max(t1 - t0, 1e-9)
    per_m = 1e6 / events if events > 0 else 0.0
    cmds = metric_sum(m1, "exposure_filter_redis_commands_total") - \
        metric_sum(m0, "exposure_filter_redis_commands_total")
    node_cpu = [c1 - c0 for c0, c1 in zip(node_cpu0, redis.cpu())]
    return {
        "events": int(events), "seconds": round(secs, 3),
        "events_per_second": round(events / secs),
        "redis_commands_per_second": round(cmds / secs),
        "daemon_cpu_s_per_million": round(cpu * per_m, 2),
        "redis_cpu_s_per_million": round(sum(node_cpu) * per_m, 2),
        "redis_nodes": redis.nodes,
        "redis_cpu_s_per_million_by_node": [round(c * per_m, 2) for c in node_cpu],
        "redis_busy_by_node": [round(c / secs, 2) for c in node_cpu],
        "broker_cpu_s_per_million": round((cpu_seconds(stack.kafka.pid) - kafka_cpu0) * per_m, 2),
        "peak_rss_mb": round(rss / 1024),
        "redis_commands_all": redis.commands() - cmds0,
        "cpu_steal": round(steal, 4),
        **({"profile": top} if profile else {}),
    }


def layout_stats(stack):
    """What the drain left in Redis (`exposure-filter layout stats`): users, bytes per
    user, keys by stages present (layout v2)."""
    r = subprocess.run([stack.binary, "layout", "stats", "--json",
                        "--set", f"redis.address=127.0.0.1:{stack.redis_port}"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: layout stats failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def ceiling(stack, events, sets=()):
    stack.flush()
    argv = [stack.binary, "bench-redis", "--json", "-n", str(events),
            "--set", f"redis.address={stack.redis_address}",
            "--users", str(MIX["users"]), "--items", str(MIX["items"]),
            "--list-size", str(MIX["list_size"]), "--list-fraction", str(MIX["list_fraction"]),
            "--spread", MIX["spread"]]
    if "zipf" in MIX:
        argv += ["--zipf", str(MIX["zipf"])]
    for s in [*BASE_SETS, *stack.redis_sets, *sets]:
        argv += ["--set", s]
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench: bench-redis failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def freshness(stack, topic, rate, seconds):
    """loadgen at `rate` events/s for `seconds` with live event times into an
    empty topic; latency quantiles from the daemon's histogram."""
    stack.flush()  # every phase starts from an empty Redis, as the drain does
    d = Daemon(stack, topic, [f"kafka.topics=[{topic}]"])
    hist = "exposure_filter_end_to_end_latency_seconds"
    # Produce only once the partitions are assigned (the group join takes ~3 s
    # on the mock), so that no event waits for the join.
    wait_until(f"freshness {topic}: the daemon to join", 60,
               lambda: any(k.startswith("exposure_filter_partition_lag_messages{") and
                           f'topic="{topic}"' in k for k in d.metrics()), 0.1)
    m0 = d.metrics()
    n = int(rate * seconds)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = cpu_seconds(d.proc.pid)
    redis_cpu0 = cpu_seconds(stack.redis.pid)
    kafka_cpu0 = cpu_seconds(stack.kafka.pid)
    lg = loadgen(stack, topic, n, rate, ["-X", f"linger.ms={LINGER_MS}"])
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    loadgen_cpu = (children1.ru_utime + children1.ru_stime) - \
        (children0.ru_utime + children0.ru_stime)
    busy = {"loadgen": loadgen_cpu, "broker": cpu_seconds(stack.kafka.pid) - kafka_cpu0,
            "daemon": cpu_seconds(d.proc.pid) - cpu0,
            "redis": cpu_seconds(stack.redis.pid) - redis_cpu0}
    target = written(m0) + lg["delivered"]
    wait_until(f"freshness {topic}: catch up", 120, lambda: written(d.metrics()) >= target, 0.05)
    m1 = d.metrics()
    d.stop()
    b0 = dict(histogram(m0, hist))
    buckets = [(b, c - b0.get(b, 0.0)) for b, c in histogram(m1, hist)]
    return {
        "target_rate": round(rate), "produced_rate": round(lg["events_per_second"]),
        "producer_linger_ms": LINGER_MS,
        "events": lg["delivered"], "seconds": seconds,
        "p50_s": round(quantile(buckets, 0.50), 4),
        "p99_s": round(quantile(buckets, 0.99), 4),
        "max_s_le": max_bound(buckets),
        # Cores used while producing, by process: the load generator and the mock
        # broker share the machine with the daemon and Redis.
        "cores_busy": {k: round(v / lg["seconds"], 2) for k, v in busy.items()},
    }


def start_run(a, module=None):
    """The start of every mode: a load warning, a run directory, the stack."""
    started = time.monotonic()
    load1 = os.getloadavg()[0]
    if load1 > 1.0:
        log(f"warning: load average is {load1:.1f}: other work on this machine skews the figures")
    run_dir = tempfile.mkdtemp(prefix="exposure-filter-bench.")
    log(f"run directory {run_dir}" + (" (Redis over TLS)" if getattr(a, "tls", False) else ""))
    return started, load1, Stack(a.binary, run_dir, a.partitions, module,
                                 getattr(a, "tls", False))


def preload(stack, a):
    """Preloads a.events events into TOPIC; returns (loadgen's result, events held)."""
    log(f"preloading {a.events} events into '{TOPIC}' ({a.partitions} partitions, zstd)")
    pre = loadgen(stack, TOPIC, a.events, 0.0, ["--spread", MIX["spread"], "--compression", "zstd"])
    return pre, available(stack, TOPIC)


def print_json(result, out):
    """The result as one JSON line on stdout, and in `out` if given."""
    line = json.dumps(result, separators=(",", ":"))
    print(line)
    if out:
        with open(out, "w") as f:
            f.write(line + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=32)
    ap.add_argument("--fresh-seconds", type=int, default=30)
    ap.add_argument("--setbit-events", type=int, default=0,
                    help="events for the setbit figures (default events/4)")
    ap.add_argument("--cluster", type=int, default=0,
                    help="only the drain: against the one redis-server, then against a local "
                         "Redis Cluster of this many masters")
    ap.add_argument("--write-modes", action="store_true",
                    help="only the drain, once per redis.write_mode (bitfield, bitop, module, "
                         "setbit) into one redis-server that loads --module")
    ap.add_argument("--modes", default="bitfield,bitop,module,setbit",
                    help="--write-modes: the modes to drain, in this order")
    ap.add_argument("--layout-versions", default="3",
                    help="--write-modes: drain each mode once per filter.layout_version in this "
                         "comma-separated list (default 3), e.g. 3,4: layout v4 against v3 in "
                         "one run")
    ap.add_argument("--thresholds", default="",
                    help="--write-modes: also drain bitop at each of these redis.bitop_threshold "
                         "values (comma-separated; the threshold sweep)")
    ap.add_argument("--near-duplicates", action="store_true",
                    help="only the drain, with filter.near_duplicates off and on (warm cache), "
                         "alternated, over --nd-items items whose content map is filled first")
    ap.add_argument("--nd-items", type=int, default=200_000,
                    help="--near-duplicates: items of the mix (each in the content map; every "
                         "10th starts a cluster that the next 2 join)")
    ap.add_argument("--nd-pairs", type=int, default=2,
                    help="--near-duplicates: off/on pairs to drain (medians are reported)")
    ap.add_argument("--zipf", type=float,
                    help="Zipf exponent of users and items (loadgen --zipf; default 1)")
    ap.add_argument("--profile", action="store_true",
                    help="--write-modes: also record redis-server and the daemon with perf "
                         "during each drain and report their hottest symbols")
    ap.add_argument("--module", help="the Redis module (build/redis-module/ef_redis.so)")
    ap.add_argument("--tls", action="store_true",
                    help="Redis over TLS: redis-server also gets a --tls-port with a CA and a "
                         "certificate made with openssl in the run directory, and the daemon and "
                         "bench-redis connect to rediss://127.0.0.1:PORT with redis.tls.ca_file "
                         "(everything else identical; not with --cluster)")
    ap.add_argument("--out")
    a = ap.parse_args()
    if not a.write_modes and (a.thresholds or a.modes != ap.get_default("modes") or
                              a.layout_versions != ap.get_default("layout_versions")):
        ap.error("--modes, --layout-versions and --thresholds go with --write-modes")
    if a.profile and not (a.write_modes or a.near_duplicates):
        ap.error("--profile goes with --write-modes or --near-duplicates")
    if a.tls and a.cluster:
        ap.error("--tls does not go with --cluster (the local cluster is plain TCP)")
    if a.zipf is not None:
        if not 0.01 <= a.zipf <= 5:
            ap.error(f"--zipf must be in [0.01, 5], got {a.zipf}")
        MIX["zipf"] = a.zipf
    if a.cluster:
        return cluster_main(a)
    if a.write_modes:
        return write_modes_main(a)
    if a.near_duplicates:
        return near_duplicates_main(a)
    setbit_events = a.setbit_events or max(a.events // 4, 1)
    started, load1, stack = start_run(a)
    try:
        pre, held = preload(stack, a)
        if held < a.events:
            log(f"the mock broker kept {held} of {a.events} events (it keeps ~5 MiB per partition; "
                f"use more --partitions): draining those")
        log(f"preloaded at {pre['events_per_second']:.0f} events/s; measuring the Redis ceiling")
        ceil = ceiling(stack, a.events)
        log(f"ceiling {ceil['events_per_second']:.0f} events/s; draining (bitfield)")
        dr = drain(stack, "bitfield", held)
        stages = layout_stats(stack)
        log(f"drain {dr['events_per_second']} events/s; setbit figures on {setbit_events} events")
        ceil_sb = ceiling(stack, setbit_events, ["redis.write_mode=setbit"])
        dr_sb = drain(stack, "setbit", setbit_events, ["redis.write_mode=setbit"])
        fresh = {}
        for pct in (50, 90):
            rate = max(dr["events_per_second"] * pct / 100, 1000)
            log(f"freshness at {pct}% of the drain rate: {rate:.0f} events/s for {a.fresh_seconds} s")
            fresh[pct] = freshness(stack, FRESH_TOPICS[pct], rate, a.fresh_seconds)
    finally:
        stack.stop()

    ratio = dr["events_per_second"] / max(ceil["events_per_second"], 1e-9)
    ratio_sb = dr_sb["events_per_second"] / max(ceil_sb["events_per_second"], 1e-9)
    result = {
        "bench": "exposure-filter", "events": a.events, "partitions": a.partitions,
        "redis_tls": a.tls, "cores": os.cpu_count(), "load_before": round(load1, 2), "mix": MIX,
        "drain": dr, "layout": stages, "ceiling": {k: ceil[k] for k in (
            "events", "seconds", "events_per_second", "commands_per_second", "redis_cpu_seconds",
            "redis_cpu_utilisation")},
        "drain_over_ceiling": round(ratio, 3),
        "setbit": {"drain_events_per_second": dr_sb["events_per_second"],
                   "ceiling_events_per_second": round(ceil_sb["events_per_second"]),
                   "drain_over_ceiling": round(ratio_sb, 3)},
        "freshness_50": fresh[50], "freshness_90": fresh[90],
        "targets": {
            "drain_ge_0.8_ceiling": ratio >= 0.8,
            "p99_lt_1s_at_50": fresh[50]["p99_s"] < 1.0,
            "p99_lt_2s_at_90": fresh[90]["p99_s"] < 2.0,
        },
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    rows = [
        ("drain (bitfield)", f"{dr['events_per_second']:,} events/s",
         f"{dr['events']:,} events in {dr['seconds']} s"),
        ("  redis commands/s", f"{dr['redis_commands_per_second']:,}", ""),
        ("  daemon cpu", f"{dr['daemon_cpu_s_per_million']} s per million events", ""),
        ("  redis cpu", f"{dr['redis_cpu_s_per_million']} s per million events", ""),
        ("  broker cpu", f"{dr['broker_cpu_s_per_million']} s per million events", "mock broker"),
        ("  daemon peak rss", f"{dr['peak_rss_mb']} MB", ""),
        ("  filters", f"{stages['users']:,} users, {stages['value_bytes_per_user']:,.0f} B/user",
         f"redis used_memory {stages['redis_used_memory_per_user']:,.0f} B/user"),
        ("  keys by stages", " ".join(f"{n}: {c:,}" for n, c in stages["keys_by_stages"].items()),
         f"layout v{stages['version']}"),
        ("redis ceiling (bitfield)", f"{ceil['events_per_second']:,.0f} events/s",
         f"redis cpu {100 * ceil['redis_cpu_utilisation']:.0f}% busy"),
        ("drain / ceiling", f"{ratio:.2f}", "target >= 0.80"),
        ("drain (setbit)", f"{dr_sb['events_per_second']:,} events/s",
         f"{dr_sb['events']:,} events"),
        ("redis ceiling (setbit)", f"{ceil_sb['events_per_second']:,.0f} events/s",
         f"drain / ceiling {ratio_sb:.2f}"),
    ]
    for pct in (50, 90):
        f = fresh[pct]
        rows.append((f"freshness at {pct}%",
                     f"p50 {f['p50_s']:.3f} s  p99 {f['p99_s']:.3f} s  max <= {f['max_s_le']} s",
                     f"{f['produced_rate']:,} events/s for {f['seconds']} s; target p99 < "
                     f"{1 if pct == 50 else 2} s"))
        rows.append(("  cores busy", " ".join(f"{k} {v}" for k, v in f["cores_busy"].items()),
                     "while producing"))
    width = max(len(r[0]) for r in rows)
    print(f"exposure-filter bench: {a.events:,} events, {a.partitions} partitions, "
          f"{'Redis over TLS, ' if a.tls else ''}{os.cpu_count()} cores, {result['elapsed_s']} s")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:<44} {note}")
    print_json(result, a.out)


def cluster_main(a):
    """--cluster N: the same preloaded drain against 1 Redis node and against N
    masters of a local Redis Cluster, in one run."""
    started, load1, stack = start_run(a)
    try:
        held = preload(stack, a)[1]
        log(f"draining {held} events into 1 Redis node")
        one = drain(stack, "one-node", held)
        log(f"1 node: {one['events_per_second']} events/s; starting a {a.cluster}-master cluster")
        cluster = LocalCluster(stack, a.cluster)
        many = drain(stack, "cluster", held, redis=cluster)
        log(f"{a.cluster} masters: {many['events_per_second']} events/s")
    finally:
        stack.stop()
    result = {"bench": "exposure-filter-cluster", "events": held, "partitions": a.partitions,
              "cores": os.cpu_count(), "load_before": round(load1, 2), "mix": MIX,
              "one_node": one, "cluster": many, "masters": a.cluster,
              "elapsed_s": round(time.monotonic() - started, 1)}
    print(f"exposure-filter bench --cluster {a.cluster}: {held:,} events, {os.cpu_count()} cores, "
          f"{result['elapsed_s']} s")
    print(f"  {'':<22} {'events/s':>10} {'daemon cpu s/M':>15} {'redis cpu s/M':>14} "
          f"{'per node s/M':>24} {'redis busy by node':>22}")
    for name, r in (("1 node", one), (f"{a.cluster} masters", many)):
        print(f"  {name:<22} {r['events_per_second']:>10,} {r['daemon_cpu_s_per_million']:>15} "
              f"{r['redis_cpu_s_per_million']:>14} "
              f"{' '.join(str(x) for x in r['redis_cpu_s_per_million_by_node']):>24} "
              f"{' '.join(str(x) for x in r['redis_busy_by_node']):>22}")
    print_json(result, a.out)


def write_modes_main(a):
    """--write-modes: the same preloaded drain once per write mode (and once per
    bitop threshold of --thresholds), into one redis-server with the module
    loaded, in one run: events/s and Redis CPU s per million events (issue 13's
    table), with --profile the hottest symbols of Redis and the daemon."""
    if not a.module or not os.path.exists(a.module):
        raise SystemExit(f"bench: --write-modes needs the module (--module, got {a.module})")
    known = {"bitfield", "bitop", "module", "setbit"}
    modes = list(dict.fromkeys(m for m in a.modes.split(",") if m))  # in order, once
    if not modes or any(m not in known for m in modes):
        raise SystemExit(f"bench: --modes takes a comma-separated subset of {sorted(known)}, "
                         f"got '{a.modes}'")
    try:
        thresholds = [int(t) for t in a.thresholds.split(",") if t]
    except ValueError:
        raise SystemExit(f"bench: --thresholds takes comma-separated integers, got '{a.thresholds}'")
    if "bitfield" not in modes:
        modes.insert(0, "bitfield")  # the baseline of every ratio
    try:
        versions = [int(v) for v in a.layout_versions.split(",") if v]
    except ValueError:
        versions = []
    if not versions or any(v not in (2, 3, 4) for v in versions) or len(set(versions)) < len(versions):
        raise SystemExit(f"bench: --layout-versions takes distinct layout versions among 2, 3 "
                         f"and 4, comma-separated, got '{a.layout_versions}'")
    # Each mode once per layout version, the versions of a mode one after the other
    # (a fresh FLUSHALL before each drain: under version 4 a fresh deployment, keys
    # created with the default class or, for a bucket after the first, from the
    # user's previous bucket as far as the drain has written it). Named
    # "<mode>" for the first version, "<mode>-v<N>" for the others.
    runs = [(m if v == versions[0] else f"{m}-v{v}",
             [f"redis.write_mode={m}", f"filter.layout_version={v}"])
            for m in modes for v in versions]
    runs += [(f"bitop@{t}", ["redis.write_mode=bitop", f"redis.bitop_threshold={t}",
                             f"filter.layout_version={versions[0]}"])
             for t in thresholds]
    if a.profile and subprocess.run(["perf", "--version"], capture_output=True).returncode != 0:
        raise SystemExit("bench: --profile needs perf (Debian package linux-perf)")
    started, load1, stack = start_run(a, a.module)
    results = {}
    try:
        held = preload(stack, a)[1]
        for name, sets in runs:
            log(f"draining {held} events with {' '.join(sets)}")
            results[name] = drain(stack, name, held, sets, profile=a.profile)
            log(f"{name}: {results[name]['events_per_second']} events/s, Redis "
                f"{results[name]['redis_cpu_s_per_million']} CPU s per million events")
    finally:
        stack.stop()
    base = results["bitfield"]["redis_cpu_s_per_million"]
    ratio = {m: round(r["redis_cpu_s_per_million"] / base, 3) if base else None
             for m, r in results.items()}
    result = {"bench": "exposure-filter-write-modes", "events": held, "partitions": a.partitions,
              "redis_tls": a.tls, "cores": os.cpu_count(), "load_before": round(load1, 2), "mix": MIX,
              "modes": results, "redis_cpu_vs_bitfield": ratio,
              # None when the run was too small to measure (no rates) or the
              # mode was not run.
              "targets": {"module_le_third_of_bitfield":
                          None if ratio.get("module") is None else ratio["module"] <= 1 / 3,
                          "bitop_15pct_below_bitfield":
                          None if ratio.get("bitop") is None else ratio["bitop"] <= 0.85},
              "elapsed_s": round(time.monotonic() - started, 1)}
    print(f"exposure-filter bench --write-modes: {held:,} events, "
          f"{'Redis over TLS, ' if a.tls else ''}{os.cpu_count()} cores, "
          f"zipf {MIX.get('zipf', 1)}, {result['elapsed_s']} s")
    print(f"  {'mode':<12} {'events/s':>10} {'redis cpu s/M':>14} {'vs bitfield':>12} "
          f"{'redis busy':>11} {'daemon cpu s/M':>15} {'commands/s':>11}")
    for m, r in results.items():
        print(f"  {m:<12} {r['events_per_second']:>10,} {r['redis_cpu_s_per_million']:>14} "
              f"{ratio[m]!s:>12} {r['redis_busy_by_node'][0]:>11} "
              f"{r['daemon_cpu_s_per_million']:>15} {r['redis_commands_per_second']:>11,}")
    if a.profile:
        for m, r in results.items():
            for who, rows in r["profile"].items():
                print(f"  profile {m} {who}: " +
                      "; ".join(f"{pct:.1f}% {sym}" for pct, _, sym in rows[:8]))
    print_json(result, a.out)


def fill_content_map(stack, items, prefix="ef:"):
    """The content map (docs/CONTENT.md rule 4) of loadgen's items i1..i<items>:
    item i<r> is in cluster i<r - r % 10> (so 2 in 10 items are later members of
    a cluster: the daemon writes their cluster token), written with redis-cli
    --pipe. Returns the share of items with a token."""
    def resp(*args):
        out = [b"*%d\r\n" % len(args)]
        for x in args:
            out.append(b"$%d\r\n%s\r\n" % (len(x), x))
        return b"".join(out)
    chunks = []
    tokens = 0
    for r in range(1, items + 1):
        item = b"i%d" % r
        first = r - r % 10 if r % 10 in (1, 2) and r >= 10 else r
        tokens += first != r
        value = r.to_bytes(8, "big") + (r * 0x9E3779B97F4A7C15 % 2**64).to_bytes(8, "big") + \
            b"i%d" % first
        key = prefix.encode() + b"cm{" + item + b"}"
        chunks.append(resp(b"SET", key, value))
    p = subprocess.run(["redis-cli", "-p", str(stack.redis_port), "--pipe"], input=b"".join(chunks),
                       capture_output=True, timeout=300)
    if p.returncode != 0 or b"errors: 0" not in p.stdout:
        raise SystemExit(f"bench: filling the content map failed: {p.stdout[-300:]!r} {p.stderr[-300:]!r}")
    return tokens / items


def near_duplicates_main(a):
    """--near-duplicates: issue 31's drain target: with filter.near_duplicates on
    and a warm cache (content.cache_items above the mix's items), at least 85% of
    the drain with it off, same events, same run (module write mode when the
    module is given, else bitfield). Each drain is measured over its second half:
    the first half warms the cache (and, with it off, the daemon alike). Pairs
    alternate off/on; medians reported."""
    MIX["items"] = a.nd_items
    mode = "module" if a.module and os.path.exists(a.module) else "bitfield"
    started, load1, stack = start_run(a, a.module if mode == "module" else None)
    runs = {"off": [], "on": []}
    token_share = 0.0
    try:
        held = preload(stack, a)[1]
        base = [f"redis.write_mode={mode}"]
        on = base + ["filter.near_duplicates=true", f"content.cache_items={2 * a.nd_items}"]

        def fill():
            nonlocal token_share
            token_share = fill_content_map(stack, a.nd_items)
        for i in range(a.nd_pairs):
            for name, sets in (("off", base), ("on", on)):
                log(f"pair {i + 1}: draining {held} events, near_duplicates {name}")
                r = drain(stack, f"nd-{name}-{i}", held, sets, prepare=fill, warm=0.5,
                          profile=a.profile)
                runs[name].append(r)
                log(f"  {name}: {r['events_per_second']} events/s, daemon "
                    f"{r['daemon_cpu_s_per_million']} CPU s per million events")
    finally:
        stack.stop()

    def median(name, field):
        v = sorted(r[field] for r in runs[name])
        m = v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
        return round(m) if field == "events_per_second" else round(m, 3)
    ratio = median("on", "events_per_second") / max(median("off", "events_per_second"), 1)
    result = {"bench": "exposure-filter-near-duplicates", "events": held, "mode": mode,
              "redis_tls": a.tls, "cores": os.cpu_count(), "load_before": round(load1, 2), "mix": MIX,
              "token_share_of_items": round(token_share, 3), "runs": runs,
              "events_per_second": {n: median(n, "events_per_second") for n in runs},
              "daemon_cpu_s_per_million": {n: median(n, "daemon_cpu_s_per_million") for n in runs},
              "redis_cpu_s_per_million": {n: median(n, "redis_cpu_s_per_million") for n in runs},
              "on_vs_off": round(ratio, 3), "targets": {"on_at_least_85pct_of_off": ratio >= 0.85},
              "elapsed_s": round(time.monotonic() - started, 1)}
    print(f"exposure-filter bench --near-duplicates: {held:,} events over {a.nd_items:,} items "
          f"({token_share:.0%} of them later cluster members), {mode} mode, "
          f"{'Redis over TLS, ' if a.tls else ''}"
          f"{os.cpu_count()} cores, {result['elapsed_s']} s")
    for n in ("off", "on"):
        print(f"  near_duplicates {n:<3}: {', '.join(str(r['events_per_second']) for r in runs[n])} "
              f"events/s (median {result['events_per_second'][n]:,}), daemon "
              f"{result['daemon_cpu_s_per_million'][n]} CPU s/M, Redis "
              f"{result['redis_cpu_s_per_million'][n]} CPU s/M")
    print(f"  on/off: {ratio:.3f} (target >= 0.85)")
    if a.profile:
        for n in ("off", "on"):
            for who, rows in runs[n][-1]["profile"].items():
                print(f"  profile {n} {who}: " +
                      "; ".join(f"{pct:.1f}% {sym}" for pct, _, sym in rows[:12]))
    print_json(result, a.out)


if __name__ == "__main__":
    main()
