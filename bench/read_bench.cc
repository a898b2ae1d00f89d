// ef_read_bench: the read-side benchmark (scripts/bench-read.sh, docs/PERFORMANCE.md
// "Read side"). Against a Redis (and optionally a running `exposure-filter serve`):
//   1. fills Redis with a realistic filter state: --users users with exposures in
//      every bucket of the window (31 daily buckets under the default config), Zipf
//      activity (per-bucket items = activity multiple x filter.items_per_bucket, the
//      median multiple --activity, heavy users up to 12x, so they use several stages
//      of layout v2), written with the daemon's Coalescer + RedisBitWriter (the
//      most active users and one user per group of light ones; the others get a
//      server-side COPY of their group's keys: see kHeavy below);
//   2. the library: one client thread, requests of --candidates candidates (a few
//      hundred exposed, the rest never exposed) for Zipf-drawn users: req/s,
//      p50/p99/p999, client thread CPU per candidate;
//   3. serve (if --serve): keep-alive HTTP clients, closed loop, once with each
//      count of --threads (default 4 and 8): its maximum rate is the best of those;
//      then open loop at 50% of that rate with the best count (latency from the
//      scheduled send time, so no coordinated omission): req/s, p50/p99/p999, CPU;
//   4. mark_served (issue 30, README "Paged feeds"): the same requests, each marking
//      the first --mark (50) unseen candidates served in its user's served ring:
//      the library (Client::FilterAndMark, one thread) and serve (POST /v1/filter
//      with "mark_served": 50), closed loop with each count of --threads, then open
//      loop at 50% of that max; every run starts from empty rings (the served keys
//      of the requests' users deleted), and reports the marks and served items per
//      request and how full the rings ended;
//   5. the raw Redis ceiling for the same reads: one MGET of the user's 32 keys per
//      request, closed loop, once with each count of --threads: the best of those;
//   6. a table, one JSON line with the figures and the targets met (true/false).
// "errors" are failed requests and fail-open answers (library: Result::failed_open;
// serve: exposure_filter_serve_failed_open_total from its /metrics).
// Nothing here asserts figures; exit status 1 only when a phase could not run.
#include <exposure_filter/client.h>
#include <httplib.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "bloom/served.h"
#include "common/open_files.h"
#include "config/config.h"
#include "contentdb/index.h"
#include "event/event.h"
#include "http_conn.h"
#include "pipeline/coalescer.h"
#include "redis/connection.h"
#include "redis/meta.h"
#include "write/bit_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string redis = "127.0.0.1:6379";
  std::string serve;  // host:port; "" = skip the serve phase
  int serve_pid = 0;  // for serve's CPU time (optional)
  int users = 20000;
  double seconds = 10;
  // Client connections of the closed loops (serve and raw MGET): each phase runs
  // once per count and reports its best, so that neither side is held to a
  // concurrency that suits the other.
  std::vector<int> threads = {4, 8};
  int candidates = 1000;
  int exposed = 300;       // of the candidates, items the user was exposed to
  double activity = 0.5;   // median activity multiple of items_per_bucket
  std::string out;         // also write the JSON line here
  bool meta_only = false;  // only store the layout (`<prefix>meta`), then exit
  int mark = 50;           // mark_served phase: candidates each request marks served
  // mark_served phase: a user's session ends (its served ring is deleted, as its TTL
  // would) after this many of its requests.
  int session_pages = 10;
  // Which phases run (for profiling one).
  std::string phases = ",library,serve,mark_served,mget,";
  // Near-duplicate content (issue 31; serve started with filter.near_duplicates):
  // "given": each request carries "clusters" (one per candidate); "map": no
  // clusters in the requests, the candidates' content-map entries are written
  // first, so serve looks them up; "none": neither.
  std::string clusters = "none";
  // --clusters map: the share of a request's lookups that serve's local cache of
  // the content map answers (issue 52): the other candidates of each request
  // sent are fresh items (indexed in the map, never sent before), and every
  // prepared request is sent once before the measured runs (the cache warm).
  double map_hit_rate = 0.95;
  // --clusters map: 0, or serve's serve.content_cache_bytes: before the measured
  // runs, the prepared requests are sent again and again (their fresh items
  // drawn from items never measured) until serve's cache holds 3/4 of these
  // bytes, which it does only once every generation of every shard has reached
  // its largest table and flipped (contentdb/cluster_cache.h): a serve that has
  // run a while, not one whose tables still grow.
  double map_steady_bytes = 0;
  // The never-exposed candidates: 0 = each one new (the requests share none),
  // else drawn from this many items (requests share them, as a catalogue's
  // popular items recur across users).
  int new_pool = 0;
  // The idle phase (issue 49): keep-alive connections held open and idle, and
  // the active ones that send requests meanwhile.
  int idle_conns = 2000;
  int active = 16;
};

[[noreturn]] void Usage(int code) {
  std::fprintf(
      code ? stderr : stdout,
      "usage: ef_read_bench --redis HOST:PORT [--serve HOST:PORT] [--serve-pid PID]\n"
      "  [--users N (20000)] [--seconds D (10)] [--threads C[,C...] (4,8)]\n"
      "  [--candidates N (1000)]\n"
      "  [--exposed N (300)] [--activity X (0.5)] [--mark N (50)] [--out FILE] [--meta-only]\n"
      "  [--phases library,serve,mark_served,mget (all)] [--clusters none|given|map]\n"
      "--clusters: given = requests carry \"clusters\" (1 candidate in 5 is in a shared\n"
      "  cluster, the others their own); map = the same clusters in the content map instead\n"
      "  (serve with filter.near_duplicates looks them up). The library phases call\n"
      "  SeenWithClusters / FilterAndMarkWithClusters (given) or run with\n"
      "  filter.near_duplicates (map).\n"
      "--map-hit-rate P (0.95): with --clusters map, each request sent has (1 - P) of its\n"
      "  candidates fresh (indexed in the map, never sent before), and every prepared request\n"
      "  is sent once before the measured runs, so serve's cache answers P of the lookups.\n"
      "--map-steady-bytes N (0): with --clusters map, N = serve.content_cache_bytes: before\n"
      "  measuring, send the prepared requests again (fresh items never measured) until\n"
      "  serve's cache holds 3/4 of N: every generation filled and flipped (a serve that has\n"
      "  run a while, not one whose tables still grow).\n"
      "--new-pool N (0): draw the never-exposed candidates from N items (0: each new).\n"
      "--meta-only: store the default layout's meta (for serve to start), nothing else.\n"
      "  [--session-pages P (10)]\n"
      "--mark: the mark_served phase's requests mark this many candidates served.\n"
      "--session-pages: in the mark_served phase, a user's session (its served ring) ends\n"
      "  after P of its requests.\n"
      "--phases: run only these phases (e.g. serve, to profile it); targets need all of them\n"
      "  (mark_served's compare with serve's). `idle` runs alone (not part of the default):\n"
      "  --active C connections (16) without, then with --idle-conns N (2000) idle keep-alive\n"
      "  connections open, closed loop then open loop at 50%% of the max without; /readyz\n"
      "  probed every 20 ms on a new connection throughout.\n");
  std::exit(code);
}

Args Parse(int argc, char** argv) {
  Args a;
  bool exposed_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") Usage(0);
    if (k == "--meta-only") {
      a.meta_only = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ef_read_bench: %s needs a value\n", k.c_str());
      Usage(2);
    }
    std::string v = argv[++i];
    if (k == "--redis")
      a.redis = v;
    else if (k == "--serve")
      a.serve = v;
    else if (k == "--serve-pid")
      a.serve_pid = std::atoi(v.c_str());
    else if (k == "--users")
      a.users = std::atoi(v.c_str());
    else if (k == "--seconds")
      a.seconds = std::atof(v.c_str());
    else if (k == "--threads") {
      a.threads.clear();
      for (size_t b = 0; b <= v.size();) {
        size_t e = v.find(',', b);
        if (e == std::string::npos) e = v.size();
        const int c = std::atoi(v.substr(b, e - b).c_str());
        if (c < 1 || c > 1024) {
          std::fprintf(stderr, "ef_read_bench: --threads %s: each count must be 1..1024\n",
                       v.c_str());
          std::exit(2);
        }
        a.threads.push_back(c);
        b = e + 1;
      }
    } else if (k == "--candidates")
      a.candidates = std::atoi(v.c_str());
    else if (k == "--exposed") {
      a.exposed = std::atoi(v.c_str());
      exposed_given = true;
    } else if (k == "--activity")
      a.activity = std::atof(v.c_str());
    else if (k == "--mark")
      a.mark = std::atoi(v.c_str());
    else if (k == "--session-pages")
      a.session_pages = std::atoi(v.c_str());
    else if (k == "--out")
      a.out = v;
    else if (k == "--idle-conns")
      a.idle_conns = std::atoi(v.c_str());
    else if (k == "--active")
      a.active = std::atoi(v.c_str());
    else if (k == "--clusters") {
      if (v != "none" && v != "given" && v != "map") {
        std::fprintf(stderr, "ef_read_bench: --clusters %s: expected none, given or map\n",
                     v.c_str());
        std::exit(2);
      }
      a.clusters = v;
    } else if (k == "--new-pool") {
      a.new_pool = std::atoi(v.c_str());
    } else if (k == "--map-hit-rate") {
      a.map_hit_rate = std::atof(v.c_str());
      if (!(a.map_hit_rate >= 0 && a.map_hit_rate <= 1)) {
        std::fprintf(stderr, "ef_read_bench: --map-hit-rate %s: expected 0..1\n", v.c_str());
        std::exit(2);
      }
    } else if (k == "--map-steady-bytes") {
      a.map_steady_bytes = std::atof(v.c_str());
      if (!(a.map_steady_bytes >= 0)) {
        std::fprintf(stderr, "ef_read_bench: --map-steady-bytes %s: expected bytes >= 0\n",
                     v.c_str());
        std::exit(2);
      }
    } else if (k == "--phases")
      a.phases = "," + v + ",";
    else {
      std::fprintf(stderr, "ef_read_bench: unknown option %s\n", k.c_str());
      Usage(2);
    }
  }
  for (size_t b = 1; b < a.phases.size(); b = a.phases.find(',', b) + 1) {
    const std::string phase = a.phases.substr(b, a.phases.find(',', b) - b);
    if (phase != "library" && phase != "serve" && phase != "mark_served" && phase != "mget" &&
        phase != "idle") {
      std::fprintf(stderr,
                   "ef_read_bench: --phases: unknown phase '%s' (library, serve, mark_served, "
                   "mget, idle)\n",
                   phase.c_str());
      std::exit(2);
    }
  }
  if (a.map_steady_bytes > 0 && (a.clusters != "map" || a.map_hit_rate >= 1)) {
    std::fprintf(stderr,
                 "ef_read_bench: --map-steady-bytes needs --clusters map and --map-hit-rate < 1 "
                 "(fresh items are what fill the cache)\n");
    std::exit(2);
  }
  if (!exposed_given) a.exposed = std::min(a.exposed, a.candidates);  // 30% of 1,000
  if (a.users < 1 || a.seconds <= 0 || a.threads.empty() || a.candidates < 1 || a.exposed < 0 ||
      a.exposed > a.candidates || a.activity <= 0 || a.mark < 1 || a.session_pages < 1 ||
      a.idle_conns < 0 || a.active < 1) {
    std::fprintf(stderr,
                 "ef_read_bench: --users, --seconds, --threads, --candidates, --activity, --mark, "
                 "--session-pages "
                 "must be > 0 and --exposed in [0, --candidates]\n");
    std::exit(2);
  }
  return a;
}

bool SplitHostPort(const std::string& s, std::string* host, int* port) {
  size_t c = s.rfind(':');
  if (c == std::string::npos) return false;
  *host = s.substr(0, c);
  *port = std::atoi(s.c_str() + c + 1);
  return *port > 0;
}

uint64_t Mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::string UserId(int rank) { return "user-" + std::to_string(rank); }

// The fill writes the kHeavy most active users and one user in each group of
// kGroup after them with the writer; every other user gets a server-side COPY of
// the keys of its group's written user (same items, same stages, same TTLs), so
// Redis holds the keys of all users while the writer writes ~1/kGroup of the
// light users' items (BITFIELD is what limits the fill: ~0.2 M items/s here).
// Item positions do not depend on the user, so a copy is exactly the filter of a
// user who saw the same items; requests name the items of WrittenRank(rank).
constexpr int kHeavy = 100;
constexpr int kGroup = 40;
int WrittenRank(int rank) {
  if (rank <= kHeavy) return rank;
  return kHeavy + 1 + (rank - kHeavy - 1) / kGroup * kGroup;
}

// Items the user of `rank` saw in bucket b: a catalogue of 10M items, drawn
// deterministically, so the requests can name exposed items again.
std::string ExposedItem(int rank, int b, int j) {
  uint64_t h = Mix((uint64_t(rank) << 40) ^ (uint64_t(b) << 24) ^ uint64_t(j));
  return "item-" + std::to_string(h % 10000000);
}

// Per-bucket item count of user `rank` (1-based) in bucket b: activity multiple
// activity * (N / 2 / rank)^0.6 (median = activity), capped at 12, x a jitter
// in [0.5, 1.5), times items_per_bucket; at least 1.
int ItemsInBucket(const Args& a, int64_t ipb, int rank, int b) {
  double mult = a.activity * std::pow(a.users / 2.0 / rank, 0.6);
  mult = std::min(mult, 12.0);
  double jitter = 0.5 + double(Mix((uint64_t(rank) << 20) ^ uint64_t(b) ^ 0x55) % 1000) / 1000;
  return std::max(1, int(std::lround(mult * jitter * double(ipb))));
}

// Zipf(s) over ranks 1..n.
class Zipf {
 public:
  Zipf(int n, double s) : cdf_(n) {
    double sum = 0;
    for (int r = 1; r <= n; ++r) cdf_[r - 1] = sum += 1.0 / std::pow(r, s);
    for (double& c : cdf_) c /= sum;
  }
  int operator()(std::mt19937_64& rng) const {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return int(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin()) + 1;
  }

 private:
  std::vector<double> cdf_;
};

struct Latencies {
  std::vector<double> us;
  double Pct(double p) {
    if (us.empty()) return 0;
    size_t i = std::min(us.size() - 1, size_t(p * double(us.size())));
    std::nth_element(us.begin(), us.begin() + long(i), us.end());
    return us[i];
  }
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double ProcessCpuSeconds(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t p = s.rfind(')');
  if (p == std::string::npos) return 0;
  std::istringstream in(s.substr(p + 2));
  std::string field;
  unsigned long long ut = 0, st = 0;
  for (int i = 0; i < 13 && in >> field; ++i) {
    if (i == 11) ut = std::stoull(field);
    if (i == 12) st = std::stoull(field);
  }
  return double(ut + st) / double(sysconf(_SC_CLK_TCK));
}

// This process (the load generator) and Redis (INFO cpu: all its threads).
double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

double RedisCpuSeconds(const ef::RedisOptions& ro) {
  auto conn = ef::RedisConnection::Connect(ro);
  if (!conn.ok()) return 0;
  auto info = (*conn)->Command({"INFO", "cpu"});
  if (!info.ok()) return 0;
  double total = 0;
  for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
    size_t p = info->str.find(field);
    if (p != std::string::npos) total += std::atof(info->str.c_str() + p + std::strlen(field));
  }
  return total;
}

// The machine's CPU time from /proc/stat's "cpu" line, in clock ticks: all of it,
// and the part the hypervisor gave to other guests while this one wanted to run
// (steal). On a virtual machine a phase with steal says its figures are low.
struct MachineTicks {
  unsigned long long total = 0, steal = 0;
};

MachineTicks ReadMachineTicks() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  MachineTicks t;
  if (!(f >> cpu) || cpu != "cpu") return t;
  unsigned long long v = 0;
  // user nice system idle iowait irq softirq steal (guest times are inside user).
  for (int i = 0; i < 8 && f >> v; ++i) {
    t.total += v;
    if (i == 7) t.steal = v;
  }
  return t;
}

// A phase with more steal than this gets a warning under the table.
constexpr double kStealWarning = 0.05;

// CPU per request of the three processes on the machine's cores during a phase,
// and the share of the machine's CPU time stolen by the hypervisor meanwhile.
struct CpuShare {
  double serve_us = 0, loadgen_us = 0, redis_us = 0;
  double steal = 0;  // 0..1
};

class CpuMeter {
 public:
  CpuMeter(const ef::RedisOptions& ro, int serve_pid) : ro_(ro), serve_pid_(serve_pid) {}
  void Start() {
    serve0_ = serve_pid_ ? ProcessCpuSeconds(serve_pid_) : 0;
    self0_ = SelfCpuSeconds();
    redis0_ = RedisCpuSeconds(ro_);
    machine0_ = ReadMachineTicks();
  }
  CpuShare Stop(uint64_t requests) const {
    CpuShare c;
    if (requests == 0) return c;
    const double per = 1e6 / double(requests);
    c.serve_us = serve_pid_ ? (ProcessCpuSeconds(serve_pid_) - serve0_) * per : 0;
    c.loadgen_us = (SelfCpuSeconds() - self0_) * per;
    c.redis_us = (RedisCpuSeconds(ro_) - redis0_) * per;
    const MachineTicks m = ReadMachineTicks();
    if (m.total > machine0_.total)
      c.steal = double(m.steal - machine0_.steal) / double(m.total - machine0_.total);
    return c;
  }

 private:
  ef::RedisOptions ro_;
  int serve_pid_;
  double serve0_ = 0, self0_ = 0, redis0_ = 0;
  MachineTicks machine0_;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One prepared request: user, candidates, its POST /v1/filter (whole HTTP request,
// built before any clock starts, as wrk does), the same with "mark_served" and its
// 32 keys as RESP MGET.
struct Request {
  std::string user;
  std::vector<std::string> candidates;
  // --clusters given: each candidate's cluster (ClusterOf), and views of both for
  // the library's *WithClusters calls.
  std::vector<std::string> clusters;
  std::vector<std::string_view> candidate_views, cluster_views;
  std::string http;
  std::string http_mark;
  std::string mget;
  bool heavy = false;  // the user has > items_per_bucket items in some bucket (stage 1+)
  int rank = 0;        // the user's rank (UserId(rank) == user)
  // --clusters map: where in `http` the digits of its fresh items are
  // (FreshItem's), rewritten before each send.
  std::vector<size_t> fresh_at;
};

// --clusters map: fresh item n (indexed in the map for n < kFreshIndexed).
constexpr int kFreshDigits = 9;
constexpr uint64_t kFreshIndexed = 1000000;
std::string FreshItem(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "fresh-%0*" PRIu64, kFreshDigits, n);
  return buf;
}
// The next fresh item of all threads.
std::atomic<uint64_t> g_fresh{0};

// The request to send: `r.http` with its fresh items (if any) made new ones.
const std::string& WithFreshItems(const Request& r, std::string* scratch) {
  if (r.fresh_at.empty()) return r.http;
  *scratch = r.http;
  uint64_t n = g_fresh.fetch_add(r.fresh_at.size(), std::memory_order_relaxed);
  char digits[32];
  for (size_t at : r.fresh_at) {
    std::snprintf(digits, sizeof digits, "%0*" PRIu64, kFreshDigits, n++ % 1000000000);
    scratch->replace(at, kFreshDigits, digits);
  }
  return *scratch;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

// The content cluster of a candidate in the --clusters phases: 1 in 5 are in one
// of 1,000 shared clusters, the others are their own cluster (most items have no
// near duplicate).
std::string ClusterOf(const std::string& item) {
  const size_t h = std::hash<std::string>{}(item);
  return h % 5 == 0 ? "cl-" + std::to_string(h / 5 % 1000) : item;
}

std::vector<Request> PrepareRequests(const Args& a, const ef::Layout& layout, int64_t ipb,
                                     int64_t now, size_t count) {
  Zipf zipf(a.users, 0.8);
  std::mt19937_64 rng(42);
  std::vector<int64_t> read = ef::ReadBuckets(now, layout.window_seconds, layout.bucket_seconds);
  int live = int(read.size()) - 1;
  std::vector<Request> out(count);
  uint64_t fresh = 0;
  for (Request& r : out) {
    int user_rank = zipf(rng);
    r.user = UserId(user_rank);
    r.rank = user_rank;
    int rank = WrittenRank(user_rank);
    for (int b = 0; b < live; ++b) r.heavy |= ItemsInBucket(a, ipb, rank, b) > ipb;
    for (int i = 0; i < a.exposed; ++i) {
      int b = int(rng() % uint64_t(live));
      int j = int(rng() % uint64_t(ItemsInBucket(a, ipb, rank, b)));
      r.candidates.push_back(ExposedItem(rank, b, j));
    }
    while (int(r.candidates.size()) < a.candidates)  // never exposed
      r.candidates.push_back(
          "new-" + std::to_string(a.new_pool > 0 ? rng() % uint64_t(a.new_pool) : fresh++));
    std::shuffle(r.candidates.begin(), r.candidates.end(), rng);
    // --clusters map: the last candidates are fresh items, new at every send.
    const size_t fresh =
        a.clusters == "map"
            ? std::min(r.candidates.size(),
                       size_t(std::lround((1 - a.map_hit_rate) * double(r.candidates.size()))))
            : 0;
    for (size_t i = r.candidates.size() - fresh; i < r.candidates.size(); ++i)
      r.candidates[i] = FreshItem(0);
    std::string body = "{\"user_id\":\"" + JsonEscape(r.user) + "\",\"items\":[";
    std::vector<size_t> fresh_in_body;
    for (size_t i = 0; i < r.candidates.size(); ++i) {
      if (i) body += ',';
      if (i >= r.candidates.size() - fresh)
        fresh_in_body.push_back(body.size() + 1 + r.candidates[i].size() - kFreshDigits);
      body += '"' + JsonEscape(r.candidates[i]) + '"';
    }
    body += "]";
    if (a.clusters == "given") {
      body += ",\"clusters\":[";
      for (size_t i = 0; i < r.candidates.size(); ++i) {
        if (i) body += ',';
        r.clusters.push_back(ClusterOf(r.candidates[i]));
        body += '"' + JsonEscape(r.clusters.back()) + '"';
      }
      body += "]";
      r.candidate_views.assign(r.candidates.begin(), r.candidates.end());
      r.cluster_views.assign(r.clusters.begin(), r.clusters.end());
    }
    r.http = bench::HttpConn::Post(a.serve, "/v1/filter", body + "}");
    // The body ends the request (its headers come first).
    const size_t body_at = r.http.size() - body.size() - 1;
    for (size_t at : fresh_in_body) r.fresh_at.push_back(body_at + at);
    r.http_mark = bench::HttpConn::Post(a.serve, "/v1/filter",
                                        body + ",\"mark_served\":" + std::to_string(a.mark) + "}");
    r.mget = "*" + std::to_string(read.size() + 1) + "\r\n$4\r\nMGET\r\n";
    for (int64_t start : read) {
      std::string key = ef::MakeKey(layout.prefix, r.user, start, layout.bucket_seconds);
      r.mget += "$" + std::to_string(key.size()) + "\r\n" + key + "\r\n";
    }
  }
  return out;
}

struct FillResult {
  double seconds = 0;
  uint64_t items = 0, keys = 0, commands = 0;
  uint64_t written_users = 0, copied_keys = 0;
  uint64_t used_memory = 0;
  int heavy_users = 0;  // users with > 1x items_per_bucket in some bucket (stage 1+)
};

bool Fill(const Args& a, const ef::RedisOptions& ro, const ef::Layout& layout, int64_t ipb,
          int64_t now, FillResult* res) {
  auto conn = ef::RedisConnection::Connect(ro);
  if (!conn.ok()) {
    std::fprintf(stderr, "ef_read_bench: connect to Redis %s: %s\n", a.redis.c_str(),
                 conn.status().ToString().c_str());
    return false;
  }
  ef::Layout effective;
  ef::Status st = ef::EnsureMeta(**conn, layout, &effective);
  if (!st.ok()) {
    std::fprintf(stderr, "ef_read_bench: meta at %smeta: %s\n", layout.prefix.c_str(),
                 st.ToString().c_str());
    return false;
  }
  if (a.meta_only) return true;
  ef::RedisConfig rc;
  ef::RedisBitWriter writer(ef::BitWriterOptionsFromConfig(rc, ro, layout));
  ef::Coalescer co(layout);
  std::vector<int64_t> live = ef::LiveBuckets(now, layout.window_seconds, layout.bucket_seconds);
  auto start = Clock::now();
  std::vector<std::string> items;
  ef::Event ev;
  size_t positions = 0;
  const size_t kMaxPositions = 4000000;
  auto flush = [&]() -> bool {
    if (co.empty()) return true;
    co.Seal();
    ef::WriteStats ws;
    ef::Status s = writer.Write(co.batch(), &ws);
    if (!s.ok()) {
      std::fprintf(stderr, "ef_read_bench: fill write: %s\n", s.ToString().c_str());
      return false;
    }
    res->commands += ws.commands;
    res->keys += ws.keys;
    co.Clear();
    positions = 0;
    return true;
  };
  std::vector<char> heavy_of(size_t(a.users) + 1);
  for (int rank = 1; rank <= a.users; ++rank) {
    if (WrittenRank(rank) != rank) {  // copied below; WrittenRank(rank) < rank
      res->heavy_users += heavy_of[size_t(WrittenRank(rank))];
      continue;
    }
    res->written_users++;
    std::string user = UserId(rank);
    bool heavy = false;
    for (int b = 0; b < int(live.size()); ++b) {
      int n = ItemsInBucket(a, ipb, rank, b);
      heavy |= n > ipb;
      items.clear();
      for (int j = 0; j < n; ++j) items.push_back(ExposedItem(rank, b, j));
      ev.user = user;
      ev.items.assign(items.begin(), items.end());
      // Inside the bucket and never after now (the newest bucket is now's).
      ev.ts_ms = std::min(live[b] + layout.bucket_seconds / 2, now) * 1000;
      co.Add(ev);
      res->items += uint64_t(n);
      positions += size_t(n) * layout.k;
      if (positions >= kMaxPositions && !flush()) return false;
    }
    res->heavy_users += heavy;
    heavy_of[size_t(rank)] = heavy;
  }
  if (!flush()) return false;
  // The other users: COPY of their group's written user, pipelined.
  std::string cmds;
  size_t n_cmds = 0;
  std::vector<ef::RedisConnection::ReplyError> errors;
  auto send = [&]() -> bool {
    if (n_cmds == 0) return true;
    ef::Status s = (*conn)->Pipeline(cmds.data(), cmds.size(), n_cmds, &errors);
    if (!s.ok() || !errors.empty()) {
      std::fprintf(stderr, "ef_read_bench: fill COPY: %s\n",
                   s.ok() ? errors[0].text.c_str() : s.ToString().c_str());
      return false;
    }
    cmds.clear();
    n_cmds = 0;
    return true;
  };
  auto bulk = [&](const std::string& x) {
    cmds += "$" + std::to_string(x.size()) + "\r\n" + x + "\r\n";
  };
  for (int rank = 1; rank <= a.users; ++rank) {
    int w = WrittenRank(rank);
    if (w == rank) continue;
    for (int64_t start : live) {
      cmds += "*3\r\n$4\r\nCOPY\r\n";
      bulk(ef::MakeKey(layout.prefix, UserId(w), start, layout.bucket_seconds));
      bulk(ef::MakeKey(layout.prefix, UserId(rank), start, layout.bucket_seconds));
      ++n_cmds;
      res->copied_keys++;
    }
    if (n_cmds >= 10000 && !send()) return false;
  }
  if (!send()) return false;
  res->seconds = Seconds(Clock::now() - start);
  auto info = (*conn)->Command({"INFO", "memory"});
  if (info.ok()) {
    size_t p = info->str.find("used_memory:");
    if (p != std::string::npos)
      res->used_memory = std::strtoull(info->str.c_str() + p + 12, nullptr, 10);
  }
  return true;
}

// Sessions of the mark_served phase. The prepared requests are replayed many times
// a run (2,000 requests, thousands a second), so without an end every user's ring
// would be full after a few seconds, as if each user pulled hundreds of pages. A
// user's session ends after --session-pages of its requests: its served ring is
// deleted, as its TTL would delete it after the session, by this thread (batched
// DELs every 5 ms, off the request threads; the Redis CPU counts in the phase).
class SessionEnder {
 public:
  SessionEnder(const ef::RedisOptions& ro, const ef::Layout& layout, int users, int pages)
      : ro_(ro), prefix_(layout.prefix), pages_(uint32_t(pages)), count_(size_t(users) + 1) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~SessionEnder() {
    stop_ = true;
    thread_.join();
  }
  // One more request of this user answered.
  void Served(const Request& r) {
    if (count_[size_t(r.rank)].fetch_add(1, std::memory_order_relaxed) % pages_ != pages_ - 1)
      return;
    std::lock_guard<std::mutex> lock(mu_);
    ended_.push_back(ef::ServedKey(prefix_, r.user));
  }
  uint64_t sessions() const { return sessions_; }
  bool failed() const { return failed_; }

 private:
  void Loop() {
    auto conn = ef::RedisConnection::Connect(ro_);
    if (!conn.ok()) {
      failed_ = true;
      return;
    }
    std::vector<std::string> del;
    for (bool last = false; !last;) {
      last = stop_.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      del = {"DEL"};
      {
        std::lock_guard<std::mutex> lock(mu_);
        del.insert(del.end(), ended_.begin(), ended_.end());
        ended_.clear();
      }
      if (del.size() == 1) continue;
      sessions_ += del.size() - 1;
      if (!(*conn)->Command(del).ok()) failed_ = true;
    }
  }

  ef::RedisOptions ro_;
  std::string prefix_;
  uint32_t pages_;
  std::vector<std::atomic<uint32_t>> count_;  // requests per user rank
  std::mutex mu_;
  std::vector<std::string> ended_;
  std::atomic<bool> stop_{false}, failed_{false};
  std::atomic<uint64_t> sessions_{0};
  std::thread thread_;
};

struct Phase {
  bool ran = false;
  double rps = 0, p50 = 0, p99 = 0, p999 = 0;  // latencies in ms
  double cpu_us_per_candidate = 0;
  uint64_t requests = 0, errors = 0;  // errors: failed requests and fail-open answers
  CpuShare cpu;                       // CPU per request of serve, this process, Redis
  double seen_ratio = 0;
  // Library only: p99 (ms) of requests for heavy users (stage 1+) and the others.
  double p99_heavy = 0, p99_light = 0, heavy_share = 0;
  int conns = 0;                                     // closed loops: the count of the best run
  std::vector<std::pair<int, double>> rps_by_conns;  // closed loops: req/s of each run
  // mark_served runs: per request, candidates marked and left out as served; the
  // requests whose answer said the mark failed (counted in errors too); the
  // rings after the run (RingStats).
  double marked_per_request = 0, served_per_request = 0;
  // serve's marks queued after the answer: p50 and p99 of their delay, ms (-1:
  // none queued, or a serve that writes before answering).
  double mark_delay_p50 = -1, mark_delay_p99 = -1;
  uint64_t mark_failed = 0;
  double ring_users = 0, ring_fill = 0, rings_full = 0;
  uint64_t sessions_ended = 0;  // sessions ended (SessionEnder) during the run
  // The content cache (issue 52) of serve, or of the library, during the run:
  // lookups it answered and lookups read from the map (-1: a build without it).
  double cache_hits = -1, cache_misses = -1;
};

void Finish(Phase* p, Latencies* l, double secs) {
  p->ran = true;
  p->requests = l->us.size();
  p->rps = double(l->us.size()) / secs;
  p->p50 = l->Pct(0.50) / 1000;
  p->p99 = l->Pct(0.99) / 1000;
  p->p999 = l->Pct(0.999) / 1000;
}

// mark == 0: Client::Seen; else Client::FilterAndMark(user, candidates, mark).
// --clusters given: the *WithClusters calls with the requests' clusters; map: the
// same calls as none, with filter.near_duplicates (the clusters from the content
// map, through the client's cache of it).
exposure_filter::Result LibraryCall(const Args& a, exposure_filter::Client& client,
                                    const Request& r, size_t mark) {
  if (a.clusters == "given") {
    return mark ? client.FilterAndMarkWithClusters(r.user, r.candidate_views, r.cluster_views, mark)
                : client.SeenWithClusters(r.user, r.candidate_views, r.cluster_views);
  }
  return mark ? client.FilterAndMark(r.user, r.candidates, mark)
              : client.Seen(r.user, r.candidates);
}

// --clusters map: r's fresh candidates (the last r.fresh_at.size()) made new
// items, as WithFreshItems does to serve's bodies: the same digits rewritten in
// place, so no string is allocated (a few µs a request of the calling thread's
// CPU, counted in the library's).
void FreshenCandidates(Request* r) {
  if (r->fresh_at.empty()) return;
  uint64_t n = g_fresh.fetch_add(r->fresh_at.size(), std::memory_order_relaxed);
  char digits[32];
  for (size_t i = r->candidates.size() - r->fresh_at.size(); i < r->candidates.size(); ++i) {
    std::snprintf(digits, sizeof digits, "%0*" PRIu64, kFreshDigits, n++ % 1000000000);
    std::string& c = r->candidates[i];
    c.replace(c.size() - kFreshDigits, kFreshDigits, digits);
  }
}

// The library's content cache (issue 52): set its bytes, and read its hits and
// misses, where the library has one (a build before issue 52 has neither: the
// bench builds against it too, to measure the old library).
template <typename Options>
void SetContentCacheBytes(Options* o, size_t bytes) {
  if constexpr (requires { o->content_cache_bytes = bytes; }) o->content_cache_bytes = bytes;
}
template <typename Stats>
void CacheCounts(const Stats& s, double* hits, double* misses) {
  if constexpr (requires { s.cluster_cache_hits; }) {
    *hits = double(s.cluster_cache_hits);
    *misses = double(s.cluster_cache_misses);
  }
}

bool RunLibrary(const Args& a, const std::vector<Request>& reqs_in, size_t mark,
                SessionEnder* sessions, Phase* out) {
  // map: a copy whose fresh candidates are rewritten before each call.
  std::vector<Request> own;
  if (a.clusters == "map") own = reqs_in;
  const std::vector<Request>& reqs = a.clusters == "map" ? own : reqs_in;
  exposure_filter::ClientOptions o;
  o.overrides = {"redis.address=" + a.redis};
  if (a.clusters != "none") o.overrides.push_back("filter.near_duplicates=true");
  // map: as serve's bench-read cache (its --content-cache-bytes default): the
  // requests' 1.8M distinct candidates fit, and a first pass fills it.
  if (a.clusters == "map") SetContentCacheBytes(&o, size_t{512} << 20);
  o.pool_size = 1;
  o.timeout = std::chrono::milliseconds(1000);
  std::string error;
  auto client = exposure_filter::Client::Create(o, &error);
  if (!client) {
    std::fprintf(stderr, "ef_read_bench: library: %s\n", error.c_str());
    return false;
  }
  const size_t warm = a.clusters == "map" ? reqs.size() : std::min<size_t>(reqs.size(), 200);
  for (size_t i = 0; i < warm; ++i) {  // warm up (no marks)
    if (a.clusters == "map") FreshenCandidates(&own[i]);
    LibraryCall(a, *client, reqs[i], 0);
  }
  double hits0 = -1, misses0 = -1;
  CacheCounts(client->stats(), &hits0, &misses0);
  Latencies lat, heavy, light;
  uint64_t seen = 0, cands = 0, marked = 0, served = 0;
  double cpu0 = ThreadCpuSeconds();
  auto t0 = Clock::now(), end = t0 + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(a.seconds));
  for (size_t i = 0;; ++i) {
    const Request& r = reqs[i % reqs.size()];
    auto s = Clock::now();
    if (s >= end) break;
    if (a.clusters == "map") FreshenCandidates(&own[i % own.size()]);
    exposure_filter::Result res = LibraryCall(a, *client, r, mark);
    lat.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
    (r.heavy ? heavy : light).us.push_back(lat.us.back());
    if (!res.ok || res.failed_open || res.mark_failed) out->errors++;
    out->mark_failed += res.mark_failed;
    seen += res.seen_count;
    marked += res.marked_count;
    served += res.served_count;
    cands += r.candidates.size();
    if (sessions) sessions->Served(r);
  }
  double secs = Seconds(Clock::now() - t0);
  double cpu = ThreadCpuSeconds() - cpu0;
  Finish(out, &lat, secs);
  if (a.clusters != "none" && hits0 >= 0) {
    double hits1 = 0, misses1 = 0;
    CacheCounts(client->stats(), &hits1, &misses1);
    out->cache_hits = hits1 - hits0;
    out->cache_misses = misses1 - misses0;
  }
  out->cpu_us_per_candidate = cands ? cpu * 1e6 / double(cands) : 0;
  out->seen_ratio = cands ? double(seen) / double(cands) : 0;
  out->heavy_share = lat.us.empty() ? 0 : double(heavy.us.size()) / double(lat.us.size());
  out->p99_heavy = heavy.Pct(0.99) / 1000;
  out->p99_light = light.Pct(0.99) / 1000;
  if (out->requests) {
    out->marked_per_request = double(marked) / double(out->requests);
    out->served_per_request = double(served) / double(out->requests);
  }
  return true;
}

// The integer after `"name":` in a JSON answer (the last occurrence: the counts
// follow the item lists), or -1.
long long JsonCount(const std::string& body, const char* name) {
  const std::string key = std::string("\"") + name + "\":";
  const size_t p = body.rfind(key);
  if (p == std::string::npos) return -1;
  return std::strtoll(body.c_str() + p + key.size(), nullptr, 10);
}

// The served keys of the requests' users.
std::vector<std::string> ServedKeys(const ef::Layout& layout, const std::vector<Request>& reqs) {
  std::vector<std::string> keys;
  for (const Request& r : reqs) keys.push_back(ef::ServedKey(layout.prefix, r.user));
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

// Deletes the requests' users' served rings, so that a mark_served run starts as a
// session does: nothing served yet.
bool ResetRings(const ef::RedisOptions& ro, const std::vector<std::string>& keys) {
  auto conn = ef::RedisConnection::Connect(ro);
  if (!conn.ok()) return false;
  std::vector<std::string> del = {"DEL"};
  del.insert(del.end(), keys.begin(), keys.end());
  return (*conn)->Command(del).ok();
}

// How full the rings are after a run: users with a ring, their mean filled slots
// (header bytes 12-15, docs/FORMAT.md rule 10) and the share of full rings.
void RingStats(const ef::RedisOptions& ro, const std::vector<std::string>& keys, Phase* out) {
  auto conn = ef::RedisConnection::Connect(ro);
  if (!conn.ok()) return;
  uint64_t users = 0, filled = 0, full = 0;
  for (const std::string& key : keys) {
    auto v = (*conn)->Command({"GETRANGE", key, "4", "15"});
    if (!v.ok() || v->str.size() != 12) continue;
    auto u32 = [&](size_t at) {
      uint32_t x = 0;
      for (int i = 3; i >= 0; --i) x = (x << 8) | static_cast<unsigned char>(v->str[at + i]);
      return x;
    };
    const uint32_t capacity = u32(0), fill = u32(8);
    users++;
    filled += fill;
    full += fill == capacity;
  }
  out->ring_users = double(users);
  out->ring_fill = users ? double(filled) / double(users) : 0;
  out->rings_full = users ? double(full) / double(users) : 0;
}

std::unique_ptr<httplib::Client> HttpClient(const std::string& host, int port) {
  auto c = std::make_unique<httplib::Client>(host, port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // else each request waits 40+ ms for delayed ACKs
  c->set_connection_timeout(2, 0);
  c->set_read_timeout(5, 0);
  return c;
}

// Counters of serve's /metrics: exposure_filter_serve_failed_open_total (answers
// "all unseen" because Redis failed or was slower than serve.timeout: 200 OK, so
// counted from /metrics), and its local content cache's hits and misses (-1: a
// serve without the cache, before issue 52).
struct ServeCounters {
  double failed_open = 0, cache_hits = -1, cache_misses = -1;
  double cache_bytes = -1;  // exposure_filter_serve_cluster_cache_bytes
};

ServeCounters ScrapeServe(const std::string& host, int port) {
  ServeCounters out;
  auto c = HttpClient(host, port);
  auto res = c->Get("/metrics");
  if (!res || res->status != 200) return out;
  auto value = [&](const char* series, double absent) {
    const std::string name = std::string("\n") + series + " ";
    const size_t p = res->body.find(name);
    return p == std::string::npos ? absent : std::atof(res->body.c_str() + p + name.size());
  };
  out.failed_open = value("exposure_filter_serve_failed_open_total", 0);
  out.cache_hits = value("exposure_filter_serve_cluster_cache_hits_total", -1);
  out.cache_misses = value("exposure_filter_serve_cluster_cache_misses_total", -1);
  out.cache_bytes = value("exposure_filter_serve_cluster_cache_bytes", -1);
  return out;
}

// serve's exposure_filter_serve_mark_delay_seconds histogram (issue 52: from a
// request's marks queued to written), cumulative buckets by upper bound; empty
// for a serve without the queue.
using Buckets = std::vector<std::pair<double, double>>;

Buckets ScrapeMarkDelay(const std::string& host, int port) {
  Buckets out;
  auto c = HttpClient(host, port);
  auto res = c->Get("/metrics");
  if (!res || res->status != 200) return out;
  const std::string head = "\nexposure_filter_serve_mark_delay_seconds_bucket{le=\"";
  for (size_t p = res->body.find(head); p != std::string::npos; p = res->body.find(head, p + 1)) {
    const char* le = res->body.c_str() + p + head.size();
    const double bound = std::strncmp(le, "+Inf", 4) == 0 ? INFINITY : std::atof(le);
    const size_t v = res->body.find("} ", p);
    if (v == std::string::npos) break;
    out.emplace_back(bound, std::atof(res->body.c_str() + v + 2));
  }
  return out;
}

// The q-quantile in ms of the observations between two scrapes, interpolated in
// its bucket as Prometheus' histogram_quantile does; -1 when none.
double DelayQuantileMs(const Buckets& before, const Buckets& after, double q) {
  if (after.empty() || before.size() != after.size()) return -1;
  const double total = after.back().second - before.back().second;
  if (total <= 0) return -1;
  double prev_bound = 0, prev_count = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const double count = after[i].second - before[i].second;
    if (count >= q * total) {
      if (std::isinf(after[i].first)) return prev_bound * 1000;
      const double in = count - prev_count;
      const double f = in > 0 ? (q * total - prev_count) / in : 1;
      return (prev_bound + f * (after[i].first - prev_bound)) * 1000;
    }
    prev_bound = after[i].first;
    prev_count = count;
  }
  return -1;
}

// rate_per_s <= 0: closed loop; else each thread sends on a fixed schedule and the
// latency counts from the scheduled time.
// mark: send the requests with "mark_served" and read the counts of each answer.
bool RunServe(const Args& a, int conns, const std::vector<Request>& reqs, double rate_per_s,
              SessionEnder* sessions, Phase* out) {
  const bool mark = sessions != nullptr;
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.serve, &host, &port)) {
    std::fprintf(stderr, "ef_read_bench: bad --serve %s (HOST:PORT)\n", a.serve.c_str());
    return false;
  }
  // Before the load connections exist: each holds one of serve's workers while
  // open (cpp-httplib), so with --threads >= serve.threads this GET would wait.
  const ServeCounters before = ScrapeServe(host, port);
  std::vector<Latencies> lat(conns);
  std::vector<uint64_t> errors(conns), marked(conns), served(conns), mark_failed(conns);
  std::atomic<int> ready{0};
  auto dur = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  Clock::time_point t0;
  std::atomic<bool> go{false};
  std::vector<std::thread> th;
  const std::string healthz = bench::HttpConn::Get(a.serve, "/healthz");
  std::atomic<int> connect_failed{0};
  for (int t = 0; t < conns; ++t) {
    th.emplace_back([&, t] {
      bench::HttpConn c(host, port);
      if (c.RoundTrip(healthz) != 200) {  // connect before the clock starts
        std::fprintf(stderr, "ef_read_bench: serve %s: GET /healthz: %s\n", a.serve.c_str(),
                     c.error().empty() ? "not 200" : c.error().c_str());
        connect_failed++;
      }
      ready++;
      go.wait(false);  // blocks (no spinning: the CPU of this process is measured)
      auto end = t0 + dur;
      Clock::duration interval{};
      if (rate_per_s > 0)
        interval = std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(conns / rate_per_s));
      auto next = t0 + interval * t / conns;
      std::string body, fresh_request;
      for (size_t i = size_t(t) * 7919;; ++i) {
        const Request& r = reqs[i % reqs.size()];
        const std::string& request = mark ? r.http_mark : WithFreshItems(r, &fresh_request);
        Clock::time_point s;
        if (rate_per_s > 0) {
          if (next >= end) break;
          std::this_thread::sleep_until(next);
          s = next;
          next += interval;
        } else {
          s = Clock::now();
          if (s >= end) break;
        }
        const int status = c.RoundTrip(request, mark ? &body : nullptr);
        lat[t].us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        if (status != 200) {
          errors[t]++;
        } else if (mark) {  // counted after the clock, from the answer of the contract
          // The counts close the answer: read its tail only (a forward find of a
          // quoted key stops at every item's quote: ~10 us of load-generator CPU
          // a request, which serve and Redis then lack on this shared machine).
          // With near duplicates, their list closes the answer instead: then the
          // whole body.
          std::string tail = body.substr(body.size() - std::min<size_t>(body.size(), 96));
          if (tail.find("\"near_duplicate_count\":") != std::string::npos) tail = body;
          const long long m = JsonCount(tail, "marked"), sv = JsonCount(tail, "served_count");
          const bool failed = tail.find("\"mark_failed\":true") != std::string::npos;
          if (m < 0 || sv < 0 || failed) errors[t]++;
          mark_failed[t] += failed;
          marked[t] += uint64_t(std::max(0LL, m));
          served[t] += uint64_t(std::max(0LL, sv));
          sessions->Served(r);
        }
      }
    });
  }
  while (ready.load() < conns) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  t0 = Clock::now();
  go = true;
  go.notify_all();
  for (auto& x : th) x.join();
  double secs = Seconds(Clock::now() - t0);
  if (connect_failed.load()) return false;
  const ServeCounters after = ScrapeServe(host, port);
  out->errors += uint64_t(std::max(0.0, after.failed_open - before.failed_open));
  if (before.cache_hits >= 0) {
    out->cache_hits = after.cache_hits - before.cache_hits;
    out->cache_misses = after.cache_misses - before.cache_misses;
  }
  Latencies all;
  uint64_t n_marked = 0, n_served = 0;
  for (int t = 0; t < conns; ++t) {
    all.us.insert(all.us.end(), lat[t].us.begin(), lat[t].us.end());
    out->errors += errors[t];
    out->mark_failed += mark_failed[t];
    n_marked += marked[t];
    n_served += served[t];
  }
  Finish(out, &all, secs);
  if (mark && out->requests) {
    out->marked_per_request = double(n_marked) / double(out->requests);
    out->served_per_request = double(n_served) / double(out->requests);
  }
  return true;
}

// --clusters map: the prepared requests sent to serve on 4 connections,
// unmeasured, each with its fresh items made new: every one once (until ==
// nullptr), or round and round until *until is set or one fails. Counts the
// requests sent in *sent and those that failed in *failed.
void SendWarming(const std::string& host, int port, const std::vector<Request>& reqs,
                 const std::atomic<bool>* until, std::atomic<uint64_t>* sent,
                 std::atomic<int>* failed) {
  const size_t conns = std::min<size_t>(4, reqs.size());  // none for no request
  std::vector<std::thread> th;
  for (size_t t = 0; t < conns; ++t) {
    th.emplace_back([&, t] {
      bench::HttpConn c(host, port);
      std::string fresh_request;
      for (size_t i = t; until ? !until->load() && failed->load() == 0 : i < reqs.size();
           i = until ? (i + conns) % reqs.size() : i + conns) {
        *failed += c.RoundTrip(WithFreshItems(reqs[i], &fresh_request)) != 200;
        sent->fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& x : th) x.join();
}

// --clusters map: every prepared request sent once, so that serve's content
// cache holds the requests' candidates.
bool WarmServeCache(const Args& a, const std::vector<Request>& reqs) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.serve, &host, &port)) return false;
  std::atomic<uint64_t> sent{0};
  std::atomic<int> failed{0};
  SendWarming(host, port, reqs, nullptr, &sent, &failed);
  if (failed.load())
    std::fprintf(stderr, "ef_read_bench: warming serve's cache: %d failed\n", failed.load());
  return failed.load() == 0;
}

// --map-steady-bytes: the prepared requests sent again and again until serve's
// cache holds 3/4 of a.map_steady_bytes, at most kSteadyLimitS seconds (fails
// sooner when the cache holds nothing after kEmptyLimitS: a serve with
// serve.content_cache_bytes 0). Two full tables a shard are 3/4 of its bytes,
// so that is every generation flipped, up to the arenas' bytes, which count
// too: exact for large budgets, approximate for a few MiB. Their fresh items
// are numbered from kSteadyFreshFirst (not indexed: misses to the cache all the
// same), so the measured runs' fresh items are still new to serve after.
bool WarmServeCacheSteady(const Args& a, const std::vector<Request>& reqs) {
  constexpr uint64_t kSteadyFreshFirst = 500000000;
  constexpr int kSteadyLimitS = 600;
  constexpr int kEmptyLimitS = 10;
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.serve, &host, &port)) return false;
  const double want_bytes = 0.75 * a.map_steady_bytes;
  if (ScrapeServe(host, port).cache_bytes < 0) {
    std::fprintf(stderr, "ef_read_bench: serve reports no content cache: not warmed further\n");
    return true;
  }
  const uint64_t measured_fresh = g_fresh.exchange(kSteadyFreshFirst);
  std::atomic<bool> done{false};
  std::atomic<int> failed{0};
  std::atomic<uint64_t> sent{0};
  std::thread sender([&] { SendWarming(host, port, reqs, &done, &sent, &failed); });
  const Clock::time_point start = Clock::now();
  double bytes = 0;
  bool reached = false;
  for (int s = 1; s <= kSteadyLimitS && failed.load() == 0; ++s) {
    std::this_thread::sleep_until(start + std::chrono::seconds(s));
    bytes = ScrapeServe(host, port).cache_bytes;
    if (s % 5 == 0)
      std::fprintf(stderr, "ef_read_bench: serve's cache %.0f MiB of %.0f (%llu requests)\n",
                   bytes / 1048576, want_bytes / 1048576,
                   static_cast<unsigned long long>(sent.load()));
    if ((reached = bytes >= want_bytes)) break;
    if (s >= kEmptyLimitS && bytes <= 0) {
      std::fprintf(stderr,
                   "ef_read_bench: serve's cache holds nothing after %d s "
                   "(serve.content_cache_bytes 0?)\n",
                   s);
      break;
    }
  }
  done = true;
  sender.join();
  g_fresh.store(measured_fresh);
  if (failed.load())
    std::fprintf(stderr, "ef_read_bench: warming serve's cache: %d failed\n", failed.load());
  else if (!reached)
    std::fprintf(stderr, "ef_read_bench: serve's cache held %.0f of %.0f bytes after %d s\n", bytes,
                 want_bytes, kSteadyLimitS);
  return failed.load() == 0 && reached;
}

bool RunMget(const Args& a, int conns, const ef::RedisOptions& ro, const std::vector<Request>& reqs,
             Phase* out) {
  std::vector<Latencies> lat(conns);
  std::vector<uint64_t> errors(conns);
  std::atomic<int> ready{0}, failed{0};
  std::atomic<bool> go{false};
  auto dur = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  Clock::time_point t0;
  std::vector<std::thread> th;
  for (int t = 0; t < conns; ++t) {
    th.emplace_back([&, t] {
      auto conn = ef::RedisConnection::Connect(ro);
      ready++;
      if (!conn.ok()) {
        failed++;
        return;
      }
      go.wait(false);  // blocks (no spinning: the CPU of this process is measured)
      std::vector<ef::RedisConnection::ReplyError> errs;
      for (size_t i = size_t(t) * 7919;; ++i) {
        const Request& r = reqs[i % reqs.size()];
        auto s = Clock::now();
        if (s >= t0 + dur) break;
        errs.clear();
        ef::Status st = (*conn)->Pipeline(r.mget.data(), r.mget.size(), 1, &errs);
        lat[t].us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        if (!st.ok()) {
          failed++;
          return;
        }
        errors[t] += errs.size();
      }
    });
  }
  while (ready.load() < conns) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  t0 = Clock::now();
  go = true;
  go.notify_all();
  for (auto& x : th) x.join();
  double secs = Seconds(Clock::now() - t0);
  if (failed.load()) {
    std::fprintf(stderr, "ef_read_bench: raw MGET: a Redis connection failed\n");
    return false;
  }
  Latencies all;
  for (int t = 0; t < conns; ++t) {
    all.us.insert(all.us.end(), lat[t].us.begin(), lat[t].us.end());
    out->errors += errors[t];
  }
  Finish(out, &all, secs);
  return true;
}

// --clusters map: the content map entry (docs/CONTENT.md rule 4) of every
// candidate of the requests, with ClusterOf's cluster.
bool WriteContentMap(const Args& a, const ef::RedisOptions& ro, const ef::Layout& layout,
                     const std::vector<Request>& reqs) {
  auto conn = ef::RedisConnection::Connect(ro);
  if (!conn.ok()) {
    std::fprintf(stderr, "ef_read_bench: %s\n", conn.status().ToString().c_str());
    return false;
  }
  std::set<std::string> items;
  for (const Request& r : reqs) items.insert(r.candidates.begin(), r.candidates.end());
  // The fresh items (PrepareRequests), as many as the measured runs take at most
  // (more are read as not indexed).
  if (a.map_hit_rate < 1)
    for (uint64_t n = 0; n < kFreshIndexed; ++n) items.insert(FreshItem(n));
  std::vector<std::vector<std::string>> cmds;
  std::vector<ef::RedisReply> replies;
  uint64_t seq = 0;
  for (const std::string& item : items) {
    ++seq;
    cmds.push_back(
        {"SET", layout.prefix + "cm{" + item + "}",
         ef::contentdb::EncodeMapValue(seq, seq * 0x9E3779B97F4A7C15ULL, ClusterOf(item))});
    if (cmds.size() == 1000 || seq == items.size()) {
      if (!(*conn)->Commands(cmds, &replies).ok()) {
        std::fprintf(stderr, "ef_read_bench: writing the content map failed\n");
        return false;
      }
      cmds.clear();
    }
  }
  std::fprintf(stderr, "ef_read_bench: wrote %zu content-map entries\n", items.size());
  return true;
}

}  // namespace

// Issue 49: GET /readyz every 20 ms on a new connection each time (as a
// kubelet's probes), from Start() to Stop(); its latencies and failures.
class ReadyzProber {
 public:
  ReadyzProber(std::string host, int port) : host_(std::move(host)), port_(port) {}
  void Start() {
    stop_ = false;
    lat_.us.clear();
    failures_ = 0;
    thread_ = std::thread([this] {
      const std::string request =
          bench::HttpConn::Get(host_ + ":" + std::to_string(port_), "/readyz");
      for (auto next = Clock::now(); !stop_.load(); next += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_until(next);
        bench::HttpConn c(host_, port_);
        const Clock::time_point s = Clock::now();
        const int status = c.RoundTrip(request);
        lat_.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        if (status != 200) failures_++;
      }
    });
  }
  void Stop() {
    stop_ = true;
    thread_.join();
  }
  double P99Ms() { return lat_.Pct(0.99) / 1000; }
  double MaxMs() {
    return lat_.us.empty() ? 0 : *std::max_element(lat_.us.begin(), lat_.us.end()) / 1000;
  }
  size_t probes() const { return lat_.us.size(); }
  uint64_t failures() const { return failures_; }

 private:
  std::string host_;
  int port_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  Latencies lat_;
  uint64_t failures_ = 0;
};

// Keep-alive connections opened (each answered one GET /healthz), then left
// idle: at most `n`, within `budget` (a server that holds a worker per open
// connection answers few of them).
struct IdlePool {
  std::vector<std::unique_ptr<bench::HttpConn>> conns;
  double open_seconds = 0;
  int Open(const std::string& host, int port, int n, std::chrono::seconds budget) {
    const std::string healthz = bench::HttpConn::Get(host + ":" + std::to_string(port), "/healthz");
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < n && Clock::now() - t0 < budget; ++i) {
      auto c = std::make_unique<bench::HttpConn>(host, port);
      if (c->RoundTrip(healthz) != 200) break;
      conns.push_back(std::move(c));
    }
    open_seconds = Seconds(Clock::now() - t0);
    return static_cast<int>(conns.size());
  }
  // How many still answer on their connection (a closed one fails once).
  int StillOpen(const std::string& host, int port) {
    const std::string healthz = bench::HttpConn::Get(host + ":" + std::to_string(port), "/healthz");
    int open = 0;
    for (auto& c : conns) open += c->RoundTrip(healthz) == 200;
    return open;
  }
};

struct IdleRun {
  const char* name;
  bool with_idle;
  bool half;  // open loop at 50% of the max without idle connections
  Phase phase;
  double readyz_p99 = 0, readyz_max = 0;
  size_t probes = 0;
  uint64_t probe_failures = 0;
};

// The idle phase: --active connections alone, then with --idle-conns idle
// connections open (closed loop), then open loop at 50% of the max alone, with
// them first (ABBA, so that a drift of the machine cancels out).
int RunIdleMode(const Args& a, const std::vector<Request>& reqs, const ef::RedisOptions& ro) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(a.serve, &host, &port)) {
    std::fprintf(stderr, "ef_read_bench: the idle phase needs --serve HOST:PORT\n");
    return 2;
  }
  ef::RaiseOpenFileLimit();  // the idle connections' descriptors
  CpuMeter meter(ro, a.serve_pid);
  ReadyzProber prober(host, port);
  IdlePool pool;
  std::vector<IdleRun> runs = {{"alone, closed loop", false, false, {}},
                               {"with idle, closed loop", true, false, {}},
                               {"with idle, open loop 50%", true, true, {}},
                               {"alone, open loop 50%", false, true, {}}};
  int opened = 0, still_open = 0;
  bool ok = true;
  double rate = 0;
  for (IdleRun& r : runs) {
    if (r.with_idle && pool.conns.empty() && a.idle_conns > 0) {
      std::fprintf(stderr, "ef_read_bench: opening %d idle keep-alive connections...\n",
                   a.idle_conns);
      opened = pool.Open(host, port, a.idle_conns, std::chrono::seconds(30));
      std::fprintf(stderr, "ef_read_bench: %d open in %.1f s\n", opened, pool.open_seconds);
    }
    if (!r.with_idle && !pool.conns.empty()) {
      still_open = pool.StillOpen(host, port);
      pool.conns.clear();
    }
    if (r.half && rate <= 0) rate = runs[0].phase.rps / 2;
    std::fprintf(stderr, "ef_read_bench: idle phase: %d active connections %s...\n", a.active,
                 r.name);
    prober.Start();
    meter.Start();
    ok &= RunServe(a, a.active, reqs, r.half ? rate : 0, nullptr, &r.phase);
    r.phase.cpu = meter.Stop(r.phase.requests);
    prober.Stop();
    r.phase.conns = a.active;
    r.phase.cpu_us_per_candidate = r.phase.cpu.serve_us / a.candidates;
    r.readyz_p99 = prober.P99Ms();
    r.readyz_max = prober.MaxMs();
    r.probes = prober.probes();
    r.probe_failures = prober.failures();
  }
  std::printf(
      "idle phase: %d of %d idle keep-alive connections opened in %.1f s, %d still open "
      "after the runs with them; %d active connections, %d candidates\n",
      opened, a.idle_conns, pool.open_seconds, still_open, a.active, a.candidates);
  std::printf("%-26s %9s %8s %8s %8s %10s %7s %10s %10s %7s\n", "run", "req/s", "p50 ms", "p99 ms",
              "p999 ms", "serve us/r", "errors", "readyz p99", "readyz max", "probes");
  for (IdleRun& r : runs)
    std::printf("%-26s %9.0f %8.3f %8.3f %8.3f %10.0f %7" PRIu64 " %10.3f %10.3f %7zu\n", r.name,
                r.phase.rps, r.phase.p50, r.phase.p99, r.phase.p999, r.phase.cpu.serve_us,
                r.phase.errors + r.probe_failures, r.readyz_p99, r.readyz_max, r.probes);
  const double p99_ratio = runs[3].phase.p99 > 0 ? runs[2].phase.p99 / runs[3].phase.p99 : 0;
  double readyz_p99 = 0;
  uint64_t failures = 0;
  for (IdleRun& r : runs) {
    readyz_p99 = std::max(readyz_p99, r.readyz_p99);
    failures += r.phase.errors + r.probe_failures;
  }
  const bool t_open = opened == a.idle_conns && still_open == opened;
  const bool t_p99 = p99_ratio > 0 && p99_ratio <= 1.10 && failures == 0;
  const bool t_readyz = readyz_p99 > 0 && readyz_p99 < 10;
  std::printf("target %d idle connections held open throughout: %s\n", a.idle_conns,
              t_open ? "met" : "NOT met");
  std::printf("target active p99 at 50%% with idle <= 1.10 x alone: %s (%.3f)\n",
              t_p99 ? "met" : "NOT met", p99_ratio);
  std::printf("target /readyz p99 < 10 ms throughout: %s (%.3f ms)\n", t_readyz ? "met" : "NOT met",
              readyz_p99);
  std::string json =
      "{\"bench\":\"exposure-filter-read-idle\",\"idle_conns\":" + std::to_string(a.idle_conns) +
      ",\"opened\":" + std::to_string(opened) + ",\"still_open\":" + std::to_string(still_open) +
      ",\"active\":" + std::to_string(a.active) + ",\"runs\":{";
  for (size_t i = 0; i < runs.size(); ++i) {
    const IdleRun& r = runs[i];
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s\"%s\":{\"rps\":%.1f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"p999_ms\":%.4f,"
                  "\"serve_cpu_us_per_request\":%.1f,\"errors\":%" PRIu64
                  ",\"readyz_p99_ms\":%.4f,\"readyz_max_ms\":%.4f,\"probes\":%zu,"
                  "\"probe_failures\":%" PRIu64 "}",
                  i ? "," : "", r.name, r.phase.rps, r.phase.p50, r.phase.p99, r.phase.p999,
                  r.phase.cpu.serve_us, r.phase.errors, r.readyz_p99, r.readyz_max, r.probes,
                  r.probe_failures);
    json += buf;
  }
  char tail[256];
  std::snprintf(tail, sizeof tail,
                "},\"p99_with_vs_alone\":%.4f,\"targets\":{\"idle_held\":%s,\"p99_no_worse\":%s,"
                "\"readyz_p99_lt_10ms\":%s}}",
                p99_ratio, t_open ? "true" : "false", t_p99 ? "true" : "false",
                t_readyz ? "true" : "false");
  json += tail;
  std::printf("%s\n", json.c_str());
  if (!a.out.empty()) std::ofstream(a.out) << json << "\n";
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  ef::RedisOptions ro;
  if (!SplitHostPort(a.redis, &ro.host, &ro.port)) {
    std::fprintf(stderr, "ef_read_bench: bad --redis %s (HOST:PORT)\n", a.redis.c_str());
    return 2;
  }
  ef::FilterConfig fc;
  auto layout = ef::LayoutFromConfig(fc);
  if (!layout.ok()) {
    std::fprintf(stderr, "ef_read_bench: layout: %s\n", layout.status().ToString().c_str());
    return 1;
  }
  int64_t now = std::time(nullptr);
  FillResult fill;
  std::fprintf(stderr, "ef_read_bench: filling %d users x %zu buckets...\n", a.users,
               ef::LiveBuckets(now, layout->window_seconds, layout->bucket_seconds).size());
  if (!Fill(a, ro, *layout, fc.items_per_bucket, now, &fill)) return 1;
  if (a.meta_only) return 0;
  std::fprintf(stderr, "ef_read_bench: filled %" PRIu64 " items in %.1f s\n", fill.items,
               fill.seconds);
  std::vector<Request> reqs = PrepareRequests(a, *layout, fc.items_per_bucket, now, 2000);
  if (a.clusters == "map" && !WriteContentMap(a, ro, *layout, reqs)) return 1;
  if (a.phases.find(",idle,") != std::string::npos) return RunIdleMode(a, reqs, ro);

  Phase lib, lib_mark, closed, open, mark_closed, mark_open, mget;
  bool ok = true;
  CpuMeter meter(ro, a.serve_pid);
  auto want = [&](const char* phase) {
    return a.phases.find(std::string(",") + phase + ",") != std::string::npos;
  };
  if (want("library")) {
    std::fprintf(stderr, "ef_read_bench: library, 1 thread, %.0f s...\n", a.seconds);
    meter.Start();
    ok &= RunLibrary(a, reqs, 0, nullptr, &lib);
    lib.cpu = meter.Stop(lib.requests);
    lib.conns = 1;
  }
  // mark_served runs start from no rings (as a session does) and end with RingStats.
  const bool marks = want("mark_served");
  const std::vector<std::string> served_keys = ServedKeys(*layout, reqs);
  auto reset_rings = [&] {
    if (!ResetRings(ro, served_keys)) {
      std::fprintf(stderr, "ef_read_bench: deleting the served rings failed\n");
      ok = false;
    }
  };
  if (marks) {
    std::fprintf(stderr, "ef_read_bench: library FilterAndMark(n=%d), 1 thread, %.0f s...\n",
                 a.mark, a.seconds);
    reset_rings();
    SessionEnder sessions(ro, *layout, a.users, a.session_pages);
    meter.Start();
    ok &= RunLibrary(a, reqs, size_t(a.mark), &sessions, &lib_mark);
    lib_mark.cpu = meter.Stop(lib_mark.requests);
    lib_mark.sessions_ended = sessions.sessions();
    ok &= !sessions.failed();
    lib_mark.conns = 1;
    RingStats(ro, served_keys, &lib_mark);
    reset_rings();  // serve without marks reads no ring, as before issue 30
  }
  // A closed loop once per connection count; *best = the run with the most req/s.
  // `before` runs before each run's clock and CPU meter, `after` after them.
  auto no_hook = [](Phase*) {};
  auto best_of = [&](const char* what, auto run, Phase* best, auto before, auto after) {
    for (int c : a.threads) {
      std::fprintf(stderr, "ef_read_bench: %s, closed loop, %d connections...\n", what, c);
      Phase p;
      before(&p);
      meter.Start();
      ok &= run(c, &p);
      p.cpu = meter.Stop(p.requests);
      after(&p);
      p.conns = c;
      best->rps_by_conns.emplace_back(c, p.rps);
      if (!best->ran || p.rps > best->rps) {
        auto runs = std::move(best->rps_by_conns);
        *best = p;
        best->rps_by_conns = std::move(runs);
      }
    }
  };
  if (!a.serve.empty() && want("serve") && a.clusters == "map" && a.map_hit_rate > 0) {
    std::fprintf(stderr, "ef_read_bench: warming serve's content cache (%zu requests)...\n",
                 reqs.size());
    ok &= WarmServeCache(a, reqs);
    if (ok && a.map_steady_bytes > 0) {
      std::fprintf(stderr,
                   "ef_read_bench: warming serve's content cache until it holds %.0f MiB...\n",
                   0.75 * a.map_steady_bytes / 1048576);
      ok &= WarmServeCacheSteady(a, reqs);
    }
  }
  if (!a.serve.empty() && (want("serve") || marks)) {
    // serve without marks, then with "mark_served" (from empty rings each run), so
    // that the two maxima come from the same run.
    for (const bool mark : {false, true}) {
      if (mark ? !marks : !want("serve")) continue;
      Phase& max = mark ? mark_closed : closed;
      Phase& half = mark ? mark_open : open;
      const char* what = mark ? "serve mark_served" : "serve";
      std::unique_ptr<SessionEnder> sessions;
      auto before = [&](Phase*) {
        if (!mark) return;
        reset_rings();
        sessions = std::make_unique<SessionEnder>(ro, *layout, a.users, a.session_pages);
      };
      auto after = [&](Phase* p) {
        if (!mark) return;
        p->sessions_ended = sessions->sessions();
        ok &= !sessions->failed();
        sessions.reset();
        RingStats(ro, served_keys, p);
      };
      // The marks' delay of each run, between scrapes of serve's histogram.
      std::string serve_host;
      int serve_port = 0;
      SplitHostPort(a.serve, &serve_host, &serve_port);
      Buckets delay_before;
      auto before_run = [&](Phase* p) {
        before(p);
        if (mark) delay_before = ScrapeMarkDelay(serve_host, serve_port);
      };
      auto after_run = [&](Phase* p) {
        after(p);
        if (!mark) return;
        const Buckets delay_after = ScrapeMarkDelay(serve_host, serve_port);
        p->mark_delay_p50 = DelayQuantileMs(delay_before, delay_after, 0.5);
        p->mark_delay_p99 = DelayQuantileMs(delay_before, delay_after, 0.99);
      };
      best_of(
          what, [&](int c, Phase* p) { return RunServe(a, c, reqs, 0, sessions.get(), p); }, &max,
          before_run, after_run);
      max.cpu_us_per_candidate = max.cpu.serve_us / a.candidates;
      if (max.rps > 0) {
        std::fprintf(stderr, "ef_read_bench: %s, open loop at %.0f req/s, %d connections...\n",
                     what, max.rps / 2, max.conns);
        before_run(&half);
        meter.Start();
        ok &= RunServe(a, max.conns, reqs, max.rps / 2, sessions.get(), &half);
        half.cpu = meter.Stop(half.requests);
        after_run(&half);
        half.cpu_us_per_candidate = half.cpu.serve_us / a.candidates;
        half.conns = max.conns;
      }
    }
  }
  if (want("mget")) {
    best_of(
        "raw MGET", [&](int c, Phase* p) { return RunMget(a, c, ro, reqs, p); }, &mget, no_hook,
        no_hook);
  }

  bool t_lib = lib.ran && lib.p99 <= 1.0 && lib.errors == 0;
  bool t_open = open.ran && open.p99 <= 3.0 && open.errors == 0;
  bool t_ratio = closed.ran && mget.ran && closed.rps >= 0.5 * mget.rps;
  // mark_served (issue 30): serve's max with marks >= 80% of its max without, and
  // the p99 at 50% of the max with marks <= 3 ms; answers that are not 200 with
  // the contract's counts, or say the mark failed, are errors.
  bool t_mark_ratio = closed.ran && mark_closed.ran && mark_closed.errors == 0 &&
                      mark_closed.rps >= 0.8 * closed.rps;
  bool t_mark_open = mark_open.ran && mark_open.p99 <= 3.0 && mark_open.errors == 0;
  auto row = [](const char* name, const Phase& p) {
    if (!p.ran) {
      std::printf("%-34s %10s\n", name, "skipped");
      return;
    }
    std::printf("%-34s %10.0f %8.3f %8.3f %8.3f %10.3f %7" PRIu64 "\n", name, p.rps, p.p50, p.p99,
                p.p999, p.cpu_us_per_candidate, p.errors);
  };
  std::printf("fill: %d users (%" PRIu64 " written: %" PRIu64 " items, %" PRIu64 " keys; %" PRIu64
              " keys copied), %d heavy users (stage 1+), %.1f s, Redis "
              "used_memory %.1f MiB\n",
              a.users, fill.written_users, fill.items, fill.keys, fill.copied_keys,
              fill.heavy_users, fill.seconds, double(fill.used_memory) / 1048576);
  std::printf("requests: %d candidates (%d exposed), Zipf users; library seen ratio %.3f\n",
              a.candidates, a.exposed, lib.seen_ratio);
  std::printf("%-34s %10s %8s %8s %8s %10s %7s\n", "phase", "req/s", "p50 ms", "p99 ms", "p999 ms",
              "cpu us/cand", "errors");
  row("library (1 thread)", lib);
  const std::string lib_mark_name = "library FilterAndMark n=" + std::to_string(a.mark);
  if (marks) row(lib_mark_name.c_str(), lib_mark);
  const std::string closed_name = "serve closed loop (max, C=" + std::to_string(closed.conns) + ")";
  const std::string open_name = "serve open loop (50%, C=" + std::to_string(open.conns) + ")";
  const std::string mget_name = "raw MGET ceiling (C=" + std::to_string(mget.conns) + ")";
  row(closed_name.c_str(), closed);
  row(open_name.c_str(), open);
  const std::string mark_closed_name =
      "serve mark_served max (C=" + std::to_string(mark_closed.conns) + ")";
  const std::string mark_open_name =
      "serve mark_served 50% (C=" + std::to_string(mark_open.conns) + ")";
  if (marks) {
    row(mark_closed_name.c_str(), mark_closed);
    row(mark_open_name.c_str(), mark_open);
  }
  row(mget_name.c_str(), mget);
  std::printf("CPU per request, us (whole phase):  serve  load-gen   Redis   total  steal\n");
  double max_steal = 0;
  auto cpu_row = [&max_steal](const char* name, const Phase& p) {
    if (!p.ran) return;
    std::printf("%-32s %7.0f %8.0f %7.0f %7.0f %5.1f%%\n", name, p.cpu.serve_us, p.cpu.loadgen_us,
                p.cpu.redis_us, p.cpu.serve_us + p.cpu.loadgen_us + p.cpu.redis_us,
                100 * p.cpu.steal);
    max_steal = std::max(max_steal, p.cpu.steal);
  };
  cpu_row("  library (1 thread)", lib);
  cpu_row("  serve closed loop (max)", closed);
  cpu_row("  library FilterAndMark", lib_mark);
  cpu_row("  serve mark_served (max)", mark_closed);
  cpu_row("  raw MGET ceiling", mget);
  cpu_row("  serve open loop (50%)", open);
  cpu_row("  serve mark_served (50%)", mark_open);
  if (max_steal >= kStealWarning)
    std::printf(
        "warning: the hypervisor took %.0f%% of this machine's CPU time in a phase (steal, "
        "/proc/stat): its figures are low and its latencies long; compare runs with little steal\n",
        100 * max_steal);
  auto by_conns = [](const char* name, const Phase& p) {
    if (p.rps_by_conns.size() < 2) return;
    std::printf("%s req/s by client connections:", name);
    for (const auto& [c, rps] : p.rps_by_conns) std::printf(" %d: %.0f", c, rps);
    std::printf("\n");
  };
  by_conns("serve closed loop", closed);
  by_conns("serve mark_served", mark_closed);
  by_conns("raw MGET", mget);
  std::printf(
      "library p99 by user: heavy (stage 1+, %.0f%% of requests) %.3f ms, others %.3f "
      "ms\n",
      100 * lib.heavy_share, lib.p99_heavy, lib.p99_light);
  std::printf("target library p99 <= 1 ms: %s\n", t_lib ? "met" : "NOT met");
  std::printf("target serve p99 <= 3 ms at 50%% of max: %s\n", t_open ? "met" : "NOT met");
  std::printf("target serve max >= 50%% of raw MGET: %s (%.0f%%)\n", t_ratio ? "met" : "NOT met",
              mget.rps > 0 ? 100 * closed.rps / mget.rps : 0.0);
  if (marks) {
    auto mark_row = [&](const char* name, const Phase& p) {
      if (!p.ran) return;
      std::printf(
          "%s: per request %.1f marked, %.1f served recently (left out), %" PRIu64
          " mark failures; %" PRIu64
          " sessions of %d pages ended; rings after: %.0f users, mean %.0f items, %.0f%% full\n",
          name, p.marked_per_request, p.served_per_request, p.mark_failed, p.sessions_ended,
          a.session_pages, p.ring_users, p.ring_fill, 100 * p.rings_full);
      if (p.mark_delay_p50 >= 0)
        std::printf(
            "%s: marks written after the answer: delay (the window a next page can race) p50 "
            "%.3f ms, p99 %.3f ms\n",
            name, p.mark_delay_p50, p.mark_delay_p99);
    };
    mark_row("mark_served library", lib_mark);
    mark_row("mark_served serve max", mark_closed);
    mark_row("mark_served serve 50%", mark_open);
    std::printf("target serve max with mark_served >= 80%% of serve max: %s (%.0f%%)\n",
                t_mark_ratio ? "met" : "NOT met",
                closed.rps > 0 ? 100 * mark_closed.rps / closed.rps : 0.0);
    std::printf("target serve p99 <= 3 ms at 50%% of max with mark_served: %s\n",
                t_mark_open ? "met" : "NOT met");
    // Issue 52, target 3: serve's CPU per request marked / unmarked (<= 1.2) and
    // the mark's added p50 latency at 50% of each maximum (<= 0.1 ms); one run
    // is noisy: the targets take medians of alternations (docs/PERFORMANCE.md).
    if (closed.ran && mark_closed.ran && closed.cpu.serve_us > 0 && open.ran && mark_open.ran)
      std::printf(
          "issue 52 target 3 (one run): serve CPU per request marked / unmarked at the max "
          "%.2f (target <= 1.2), p50 added by the mark at 50%% %.3f ms (target <= 0.1)\n",
          mark_closed.cpu.serve_us / closed.cpu.serve_us, mark_open.p50 - open.p50);
  }

  auto jp = [](const Phase& p) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "{\"ran\":%s,\"rps\":%.1f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"p999_ms\":%.4f,"
                  "\"cpu_us_per_candidate\":%.4f,\"requests\":%" PRIu64 ",\"errors\":%" PRIu64
                  ",\"cpu_us_per_request\":{\"serve\":%.1f,\"load_generator\":%.1f,"
                  "\"redis\":%.1f},\"cpu_steal\":%.4f,\"connections\":%d",
                  p.ran ? "true" : "false", p.rps, p.p50, p.p99, p.p999, p.cpu_us_per_candidate,
                  p.requests, p.errors, p.cpu.serve_us, p.cpu.loadgen_us, p.cpu.redis_us,
                  p.cpu.steal, p.conns);
    std::string j = buf;
    if (p.ran && (p.marked_per_request > 0 || p.ring_users > 0 || p.mark_failed > 0)) {
      std::snprintf(buf, sizeof buf,
                    ",\"mark\":{\"marked_per_request\":%.2f,\"served_per_request\":%.2f,"
                    "\"mark_failed\":%" PRIu64 ",\"sessions_ended\":%" PRIu64
                    ",\"ring_users\":%.0f,\"ring_mean_items\":%.1f,\"rings_full\":%.4f,"
                    "\"delay_p50_ms\":%.4f,\"delay_p99_ms\":%.4f}",
                    p.marked_per_request, p.served_per_request, p.mark_failed, p.sessions_ended,
                    p.ring_users, p.ring_fill, p.rings_full, p.mark_delay_p50, p.mark_delay_p99);
      j += buf;
    }
    if (p.ran && p.cache_hits >= 0) {
      const double lookups = p.cache_hits + p.cache_misses;
      std::snprintf(buf, sizeof buf,
                    ",\"cluster_cache\":{\"hits\":%.0f,\"misses\":%.0f,\"hit_rate\":%.4f}",
                    p.cache_hits, p.cache_misses, lookups > 0 ? p.cache_hits / lookups : 0.0);
      j += buf;
    }
    if (!p.rps_by_conns.empty()) {
      j += ",\"rps_by_connections\":{";
      for (size_t i = 0; i < p.rps_by_conns.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%s\"%d\":%.1f", i ? "," : "", p.rps_by_conns[i].first,
                      p.rps_by_conns[i].second);
        j += buf;
      }
      j += "}";
    }
    return j + "}";
  };
  std::string threads_list;
  for (int c : a.threads) threads_list += (threads_list.empty() ? "" : ",") + std::to_string(c);
  char head[1024];
  std::snprintf(head, sizeof head,
                "{\"users\":%d,\"seconds\":%.1f,\"threads\":[%s],\"candidates\":%d,\"exposed\":%d,"
                "\"fill\":{\"written_users\":%" PRIu64 ",\"items\":%" PRIu64 ",\"keys\":%" PRIu64
                ",\"copied_keys\":%" PRIu64
                ",\"heavy_users\":%d,"
                "\"seconds\":%.2f,\"used_memory\":%" PRIu64
                "},\"seen_ratio\":%.4f,"
                "\"library_p99_heavy_ms\":%.4f,\"library_p99_light_ms\":%.4f,"
                "\"library_heavy_share\":%.3f,",
                a.users, a.seconds, threads_list.c_str(), a.candidates, a.exposed,
                fill.written_users, fill.items, fill.keys, fill.copied_keys, fill.heavy_users,
                fill.seconds, fill.used_memory, lib.seen_ratio, lib.p99_heavy, lib.p99_light,
                lib.heavy_share);
  std::string json =
      std::string(head) + "\"library\":" + jp(lib) + ",\"serve_max\":" + jp(closed) +
      ",\"serve_half\":" + jp(open) + ",\"raw_mget\":" + jp(mget) +
      ",\"mark_served\":" + std::to_string(a.mark) +
      ",\"session_pages\":" + std::to_string(a.session_pages) +
      ",\"library_mark\":" + jp(lib_mark) + ",\"serve_mark_max\":" + jp(mark_closed) +
      ",\"serve_mark_half\":" + jp(mark_open) +
      ",\"targets\":{\"library_p99_le_1ms\":" + (t_lib ? "true" : "false") +
      ",\"serve_p99_le_3ms_at_half\":" + (t_open ? "true" : "false") +
      ",\"serve_max_ge_half_mget\":" + (t_ratio ? "true" : "false") +
      ",\"serve_mark_max_ge_80pct_serve_max\":" + (t_mark_ratio ? "true" : "false") +
      ",\"serve_mark_p99_le_3ms_at_half\":" + (t_mark_open ? "true" : "false") + "}}";
  std::printf("%s\n", json.c_str());
  if (!a.out.empty()) std::ofstream(a.out) << json << "\n";
  return ok ? 0 : 1;
}
