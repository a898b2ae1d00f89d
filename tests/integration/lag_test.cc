// `exposure-filter lag` on real parts (librdkafka mock cluster over TCP,
// redis-server, the daemon as a child process): exact lag in seconds from the
// timestamp of the first uncommitted message, the status rules seen from
// outside, and the daemon being killed while events keep arriving.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "kafka/commit_metadata.h"
#include "kafka/producer.h"
#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

int64_t NowMs() { return SystemClock().NowMs(); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// Events into chosen partitions with chosen Kafka timestamps (= event times).
class PartitionProducer {
 public:
  explicit PartitionProducer(Stack& stack) : topic_(stack.topic()) {
    ProducerOptions po;
    po.bootstrap_servers = stack.kafka().bootstrap_servers();
    auto p = KafkaProducer::Create(po);
    REQUIRE(p.ok());
    producer_ = std::move(p.value());
  }
  // One event with ts_ms into `partition`; returns ts_ms.
  int64_t Send(int32_t partition, int64_t ts_ms) {
    TestEvent e{"u" + std::to_string(partition), {"i" + std::to_string(n_++)}, ts_ms};
    REQUIRE(producer_->Produce(topic_, partition, e.user, e.Json(), ts_ms).ok());
    REQUIRE(producer_->Flush(10000).ok());
    return ts_ms;
  }

 private:
  std::string topic_;
  std::unique_ptr<KafkaProducer> producer_;
  int n_ = 0;
};

// One `lag --json ...` run, with the wall clock before and after it.
struct LagRead {
  SplitRunResult run;
  json doc;
  int64_t before_ms = 0;
  int64_t after_ms = 0;
};

LagRead ReadLag(const std::string& config, std::vector<std::string> extra = {}) {
  LagRead r;
  std::vector<std::string> args = {"lag", "-c", config, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  r.before_ms = NowMs();
  r.run = Ef(args);
  r.after_ms = NowMs();
  INFO("stdout: " << r.run.out << "\nstderr: " << r.run.err);
  REQUIRE(Lines(r.run.out).size() == 1);  // one document per refresh
  r.doc = json::parse(r.run.out);
  return r;
}

const json& PartitionOf(const json& doc, int partition) {
  for (const auto& p : doc.at("partitions"))
    if (p.at("partition") == partition) return p;
  FAIL("no partition " << partition << " in " << doc.dump());
  static json none;
  return none;
}

// The JSON documents a `lag --watch --json` child has printed so far.
// Only complete lines: the child may be writing the last one.
std::vector<json> Documents(const Process& p) {
  std::string text = p.Output();
  text.erase(text.find_last_of('\n') == std::string::npos ? 0 : text.find_last_of('\n') + 1);
  std::vector<json> out;
  for (const auto& line : Lines(text))
    if (line.front() == '{') out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("lag without a daemon: messages from the watermarks, seconds from the first message",
          "[integration][lag]") {
  Stack stack(4);
  const std::string config = stack.WriteConfig();
  PartitionProducer producer(stack);
  const int64_t now = NowMs();
  // The first message of each partition is older than the rest: the lag in
  // seconds is the age of that one, not of the newest, and not interpolated.
  // Thresholds of 60 s and 600 s (`wide`) leave minutes between each age and
  // the next threshold, so the statuses hold however long the runs take on a
  // loaded machine.
  const std::vector<std::string> wide = {"--freshness-target", "60s", "--freshness-limit", "600s"};
  std::map<int, int64_t> first_ts = {
      {0, producer.Send(0, now - 300000)},   // above the 60 s target: WARN
      {1, producer.Send(1, now - 5000)},     // fresh enough: OK
      {2, producer.Send(2, now - 1200000)},  // above the 600 s limit: ERR
  };
  for (int i = 0; i < 4; ++i) producer.Send(0, now);
  for (int i = 0; i < 2; ++i) producer.Send(1, now);
  producer.Send(2, now);
  const std::map<int, int64_t> produced = {{0, 5}, {1, 3}, {2, 2}, {3, 0}};
  const std::map<int, std::string> status = {{0, "WARN"}, {1, "OK"}, {2, "ERR"}, {3, "OK"}};

  LagRead r = ReadLag(config, wide);
  INFO(r.doc.dump(2));
  CHECK(r.run.code == 0);
  CHECK(r.run.err.empty());
  CHECK(r.doc.at("group") == stack.group());
  CHECK(r.doc.at("lag_messages") == 10);
  CHECK(r.doc.at("status") == "ERR");
  REQUIRE(r.doc.at("partitions").size() == 4);
  for (const auto& [partition, n] : produced) {
    const json& p = PartitionOf(r.doc, partition);
    CHECK(p.at("topic") == stack.topic());
    CHECK(p.at("committed_offset").is_null());  // the group never committed
    CHECK(p.at("high_watermark") == n);
    CHECK(p.at("lag_messages") == n);
    CHECK(p.at("status") == status.at(partition));
    CHECK(p.at("rate").is_null());  // one refresh: no rate yet
    if (n == 0) {
      CHECK(p.at("lag_seconds") == 0);
      continue;
    }
    const int64_t ts = first_ts.at(partition);
    CHECK(p.at("oldest_unwritten_ms") == ts);
    // now - ts, where "now" lies between the start and the end of the run.
    const double lag_s = p.at("lag_seconds").get<double>();
    CHECK(lag_s >= static_cast<double>(r.before_ms - ts) / 1000 - 0.001);
    CHECK(lag_s <= static_cast<double>(r.after_ms - ts) / 1000 + 0.001);
    CHECK(lag_s * 1000 ==
          Approx(static_cast<double>(r.doc.at("time_ms").get<int64_t>() - ts)).margin(1));
  }

  {  // The table shows the same, '-' for the missing commit.
    std::vector<std::string> args = {"lag", "-c", config};
    args.insert(args.end(), wide.begin(), wide.end());
    auto t = Ef(args);
    INFO(t.out << t.err);
    CHECK(t.code == 0);
    auto lines = Lines(t.out);
    REQUIRE(lines.size() == 7);  // title, header, 4 partitions, total
    CHECK(Words(lines[1]) == std::vector<std::string>{"TOPIC", "PARTITION", "COMMITTED", "HIGH",
                                                      "LAG_MSGS", "LOST", "LAG_S", "RATE/S",
                                                      "STATUS", "REASON"});
    for (int partition = 0; partition < 4; ++partition) {
      auto w = Words(lines[2 + partition]);
      REQUIRE(w.size() >= 9);
      CHECK(w[0] == stack.topic());
      CHECK(w[1] == std::to_string(partition));
      CHECK(w[2] == "-");
      CHECK(w[3] == std::to_string(produced.at(partition)));
      CHECK(w[4] == std::to_string(produced.at(partition)));
      CHECK(w[5] == "0");  // no commit: nothing can have been lost
      CHECK(w[7] == "-");
      CHECK(w[8] == status.at(partition));
      // Right-aligned numbers: every LAG_S cell ends where its header does.
      CHECK(lines[2 + partition].find(w[6] + "  ") + w[6].size() == lines[1].find("LAG_S") + 5);
    }
    CHECK(lines[6].find("total lag 10 message(s)") == 0);
  }
  {  // --check fails on WARN/ERR; lower thresholds turn WARN into ERR.
    auto c = Ef({"lag", "-c", config, "--check"});
    CHECK(c.code == 7);  // app::kExitData
    CHECK(c.out.find("ERR") != std::string::npos);
    LagRead strict = ReadLag(config, {"--freshness-target", "2s", "--freshness-limit", "200s"});
    CHECK(PartitionOf(strict.doc, 0).at("status") == "ERR");
    CHECK(PartitionOf(strict.doc, 1).at("status") == "WARN");
  }
  {  // The default thresholds: 10 s and 60 s; a 20-minute-old event is ERR.
    LagRead defaults = ReadLag(config);
    CHECK(defaults.doc.at("freshness_target_seconds") == 10);
    CHECK(defaults.doc.at("freshness_limit_seconds") == 60);
    CHECK(PartitionOf(defaults.doc, 2).at("status") == "ERR");
  }
}

TEST_CASE(
    "lag after SIGKILL of the daemon: STOP, with lag seconds = age of the oldest unwritten event",
    "[integration][lag]") {
  Stack stack(2);
  const std::string config = stack.WriteConfig();
  PartitionProducer producer(stack);
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 3; ++i) producer.Send(p, NowMs());
  const int64_t started = NowMs();
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));

  // The mock cluster keeps the commit metadata: STOP can be told from outside.
  for (const auto& po : stack.Offsets()) {
    INFO("metadata '" << po.metadata << "'");
    auto md = DecodeCommitMetadata(po.metadata);
    REQUIRE(md.has_value());
    CHECK(md->commit_ms >= started);
    CHECK(md->commit_ms <= NowMs());
    CHECK(md->event_ms > 0);
  }

  // Caught up: all OK, no lag, --check passes.
  LagRead ok = ReadLag(config, {"--check"});
  INFO(ok.doc.dump(2));
  CHECK(ok.run.code == 0);
  CHECK(ok.doc.at("status") == "OK");
  for (const auto& p : ok.doc.at("partitions")) {
    CHECK(p.at("lag_messages") == 0);
    CHECK(p.at("lag_seconds") == 0);
    CHECK(p.at("committed_offset") == p.at("high_watermark"));
    CHECK(p.at("status") == "OK");
    CHECK_FALSE(p.at("last_commit_ms").is_null());
  }

  daemon->Signal(SIGKILL);
  REQUIRE(daemon->Wait(10s).has_value());
  // The first events nobody will write, then more, all stamped "now".
  std::map<int, int64_t> oldest_unwritten;
  for (int p = 0; p < 2; ++p) oldest_unwritten[p] = producer.Send(p, NowMs());

  constexpr int64_t kStopAfterMs = 3 * 500;  // --samples 3 x --watch 0.5
  Process watch({EF_BINARY, "lag", "-c", config, "--watch", "0.5", "--json", "--samples", "3"},
                stack.dir().File("lag-watch.log"));
  REQUIRE(WaitFor([&] { return !Documents(watch).empty(); }, 30s));
  const json d1 = Documents(watch).back();
  for (int p = 0; p < 2; ++p) producer.Send(p, NowMs());  // events keep arriving
  json d2;
  REQUIRE(WaitFor(
      [&] {
        d2 = Documents(watch).back();
        return d2.at("lag_messages") > d1.at("lag_messages");
      },
      30s));
  const int64_t read_at = NowMs();
  INFO("first: " << d1.dump() << "\nlater: " << d2.dump());
  CHECK(d2.at("time_ms") > d1.at("time_ms"));
  for (int p = 0; p < 2; ++p) {
    const json& a = PartitionOf(d1, p);
    const json& b = PartitionOf(d2, p);
    CHECK(b.at("lag_seconds").get<double>() > a.at("lag_seconds").get<double>());
    CHECK(b.at("lag_messages").get<int64_t>() > a.at("lag_messages").get<int64_t>());
    CHECK(b.at("rate") == 0);  // nothing is being committed
    for (const json* d : std::vector<const json*>{&d1, &d2}) {
      const json& x = PartitionOf(*d, p);
      // Exactly the age of the first unwritten event at the refresh's time.
      CHECK(x.at("oldest_unwritten_ms") == oldest_unwritten[p]);
      const int64_t at = d->at("time_ms").get<int64_t>();
      CHECK(x.at("lag_seconds").get<double>() * 1000 ==
            Approx(static_cast<double>(at - oldest_unwritten[p])).margin(1));
      CHECK(at <= read_at);
    }
  }

  // STOP exactly when the last commit is older than the window.
  REQUIRE(WaitFor(
      [&] {
        const json d = Documents(watch).back();
        for (const auto& p : d.at("partitions"))
          if (p.at("status") != "STOP") return false;
        return true;
      },
      30s));
  for (const json& d : Documents(watch)) {
    for (const auto& p : d.at("partitions")) {
      INFO(p.dump());
      const int64_t age = d.at("time_ms").get<int64_t>() - p.at("last_commit_ms").get<int64_t>();
      CHECK((p.at("status") == "STOP") == (age > kStopAfterMs));
      if (p.at("status") == "STOP")
        CHECK(p.at("reason").get<std::string>().find("no commit for") == 0);
    }
  }
  // The latest refresh is still exact while events keep arriving.
  producer.Send(0, NowMs());
  const json last = Documents(watch).back();
  CHECK(PartitionOf(last, 0).at("lag_seconds").get<double>() * 1000 ==
        Approx(static_cast<double>(last.at("time_ms").get<int64_t>() - oldest_unwritten[0]))
            .margin(1));

  // --check over a short window fails and says why.
  auto check = Ef({"lag", "-c", config, "--check", "--watch", "0.2", "--samples", "2"});
  INFO(check.out << check.err);
  CHECK(check.code == 7);               // app::kExitData
  CHECK(Lines(check.out).size() == 5);  // one table, after the window: title, header, 2 rows, total
  CHECK(check.out.find("STOP") != std::string::npos);

  watch.Signal(SIGINT);
  auto code = watch.Wait(10s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);

  {  // A restarted daemon catches up and lag --check passes again.
    auto again = stack.StartDaemon(config, "daemon2.log");
    REQUIRE(stack.AwaitCommitted(*again, 60s));
    LagRead r = ReadLag(config, {"--check"});
    INFO(r.doc.dump(2));
    CHECK(r.run.code == 0);
    CHECK(r.doc.at("status") == "OK");
    CHECK(r.doc.at("lag_messages") == 0);
    REQUIRE(again->Stop(SIGTERM, 30s) == 0);
  }
}

TEST_CASE("lag --watch without a terminal prints successive tables and exits 0 on SIGINT",
          "[integration][lag]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  PartitionProducer producer(stack);
  producer.Send(0, NowMs());
  Process watch({EF_BINARY, "lag", "-c", config, "--watch", "0.2"}, stack.dir().File("watch.log"));
  auto tables = [&] {
    size_t n = 0;
    for (const auto& l : Lines(watch.Output())) n += l.rfind("TOPIC", 0) == 0;
    return n;
  };
  REQUIRE(WaitFor([&] { return tables() >= 3; }, 30s));
  watch.Signal(SIGINT);
  auto code = watch.Wait(10s);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  const std::string out = watch.Output();
  CHECK(out.find('\033') == std::string::npos);  // no screen control codes into a file
  CHECK(out.find("(refresh 0.2 s, window 10 samples)") != std::string::npos);
}

TEST_CASE("lag against an unreachable Kafka: one line naming the servers, exit 6, in time",
          "[integration][lag]") {
  const std::string servers = "127.0.0.1:" + std::to_string(FreePort());
  const auto start = std::chrono::steady_clock::now();
  auto r =
      Ef({"lag", "--set", "kafka.bootstrap_servers=" + servers, "--timeout", "2s"}, {}, "", 30s);
  const auto took = std::chrono::steady_clock::now() - start;
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 6);  // app::kExitUnreachable
  CHECK(r.out.empty());
  auto lines = Lines(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find(servers) != std::string::npos);
  CHECK(lines[0].find("timeout 2s") != std::string::npos);
  CHECK(took < 8s);
}

TEST_CASE("lag --help documents the status rules, and bad options are usage errors",
          "[integration][lag]") {
  auto h = Ef({"lag", "--help"});
  CHECK(h.code == 0);
  for (const char* word : {"--watch", "--json", "--check", "--samples", "ERR", "STOP", "STALL",
                           "WARN", "OK", "--freshness-target", "--freshness-limit", "--timeout"})
    CHECK(h.out.find(word) != std::string::npos);
  CHECK(Ef({"lag", "--samples", "1"}).code != 0);
  CHECK(Ef({"lag", "--watch", "0"}).code != 0);
  auto bad = Ef({"lag", "--freshness-target", "ten"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--freshness-target") != std::string::npos);
}

// Whether process `pid` runs the exposure-filter binary (it has exec'd: before
// that, the forked child has this test's handlers) and has a handler for `sig`
// (its SigCgt mask in /proc).
bool Handles(pid_t pid, int sig) {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  if (ec || exe != std::filesystem::canonical(EF_BINARY)) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("SigCgt:", 0) != 0) continue;
    return (std::stoull(line.substr(7), nullptr, 16) >> (sig - 1)) & 1;
  }
  return false;
}

// docs/CLI.md exit codes: `lag --check --watch` (one window of samples, then the
// verdict) stopped by a signal exits 130: interrupted, the check never finished.
// `lag --watch` alone (refresh until stopped) exits 0. SIGTERM, sent once the
// handler is in place: a process killed by it would give 143.
TEST_CASE("lag --check --watch stopped by a signal exits 130, --watch alone 0",
          "[integration][lag][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  for (const bool check : {true, false}) {
    INFO("--check " << check);
    // --check: a window of 1,000 samples, far longer than the test.
    std::vector<std::string> argv = {EF_BINARY, "lag",       "-c",   config,  "--watch",
                                     "0.5",     "--samples", "1000", "--json"};
    if (check) argv.push_back("--check");
    Process watch(argv, stack.dir().File(check ? "lag-check.log" : "lag-watch.log"));
    REQUIRE(WaitFor([&] { return Handles(watch.pid(), SIGTERM); }, 30s));
    if (!check) REQUIRE(WaitFor([&] { return !Documents(watch).empty(); }, 30s));
    INFO(watch.Output());
    CHECK(watch.Running());
    CHECK(watch.Stop(SIGTERM, 10s) == (check ? 130 : 0));
  }
}

}  // namespace ef::test
