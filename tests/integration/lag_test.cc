// `exposure-filter lag` on real parts (librdkafka mock cluster over TCP,
// redis-server, the daemon as a child process): exact lag in seconds from the
// timestamp of the first uncommitted message, the status rules seen from
// outside, the daemon being killed while events keep arriving, several groups,
// a group without commits, and the Prometheus exporter (--serve).
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "kafka/commit_metadata.h"
#include "kafka/producer.h"
#include "support/group_commit.h"
#include "support/process.h"
#include "support/scrape.h"
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

// The value of the sample with exactly these labels, if there is one.
std::optional<double> Value(const std::vector<PromSample>& samples, const std::string& name,
                            const std::map<std::string, std::string>& labels = {}) {
  for (const auto& s : samples)
    if (s.name == name && s.labels == labels) return s.value;
  return std::nullopt;
}

// Samples of `name` with `group`'s label.
size_t CountFor(const std::vector<PromSample>& samples, const std::string& name,
                const std::string& group) {
  size_t n = 0;
  for (const auto& s : samples)
    n += s.name == name && s.labels.count("group") && s.labels.at("group") == group;
  return n;
}

// The port a `lag --serve ...:0` child says it listens on, or 0 before it has.
int ServePort(const Process& p) {
  std::smatch m;
  const std::string out = p.Output();
  static const std::regex kListening("listening on port ([0-9]+)");
  return std::regex_search(out, m, kListening) ? std::stoi(m[1]) : 0;
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
  // The group has committed the start of every partition: all of it is lag.
  Commit(stack, stack.group(), {{0, 0}, {1, 0}, {2, 0}, {3, 0}});

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
    CHECK(p.at("committed_offset") == 0);
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

  {  // The table shows the same.
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
      CHECK(w[2] == "0");
      CHECK(w[3] == std::to_string(produced.at(partition)));
      CHECK(w[4] == std::to_string(produced.at(partition)));
      CHECK(w[5] == "0");  // committed at the low watermark: nothing lost
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
    REQUIRE(WaitFor([&] { return HandlesSignal(watch.pid(), SIGTERM); }, 30s));
    if (!check) REQUIRE(WaitFor([&] { return !Documents(watch).empty(); }, 30s));
    INFO(watch.Output());
    CHECK(watch.Running());
    CHECK(watch.Stop(SIGTERM, 10s) == (check ? 130 : 0));
  }
}

TEST_CASE("lag --group twice and -b: one JSON document and one table section per group",
          "[integration][lag]") {
  Stack stack(2);
  const std::string servers = stack.kafka().bootstrap_servers();
  // The config names brokers nobody listens on: -b/--brokers must win over them.
  const std::string wrong = "127.0.0.1:" + std::to_string(FreePort());
  const std::string config =
      stack.WriteConfig("ef.yaml", "kafka:\n  bootstrap_servers: \"" + wrong + "\"\n");
  PartitionProducer producer(stack);
  for (int i = 0; i < 5; ++i) producer.Send(0, NowMs());
  for (int i = 0; i < 3; ++i) producer.Send(1, NowMs());
  Commit(stack, "group-a", {{0, 1}, {1, 3}});  // lag 4 and 0
  Commit(stack, "group-b", {{0, 5}, {1, 0}});  // lag 0 and 3
  const std::map<std::string, std::map<int, int64_t>> lag = {{"group-a", {{0, 4}, {1, 0}}},
                                                             {"group-b", {{0, 0}, {1, 3}}}};
  const std::map<std::string, std::map<int, int64_t>> committed = {{"group-a", {{0, 1}, {1, 3}}},
                                                                   {"group-b", {{0, 5}, {1, 0}}}};

  // A group named twice is read once.
  auto r = Ef({"lag", "-c", config, "-b", servers, "--group", "group-a", "--group", "group-b",
               "--group", "group-a", "--json", "--freshness-target", "60s"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  auto lines = Lines(r.out);
  REQUIRE(lines.size() == 2);
  const std::vector<std::string> order = {"group-a", "group-b"};
  for (size_t i = 0; i < 2; ++i) {
    const json doc = json::parse(lines[i]);
    const std::string group = order[i];
    CHECK(doc.at("group") == group);
    CHECK(doc.at("bootstrap_servers") == servers);
    CHECK(doc.at("status") == "OK");
    CHECK(doc.at("no_committed_offsets").empty());
    for (int p = 0; p < 2; ++p) {
      CHECK(PartitionOf(doc, p).at("lag_messages") == lag.at(group).at(p));
      CHECK(PartitionOf(doc, p).at("committed_offset") == committed.at(group).at(p));
    }
  }

  // The table: one section per group (title, header, rows, total), a blank line
  // between them; --brokers is -b.
  auto t = Ef({"lag", "-c", config, "--brokers", servers, "--group", "group-a", "--group",
               "group-b", "--freshness-target", "60s"});
  INFO(t.out << t.err);
  CHECK(t.code == 0);
  CHECK(t.out.find("\n\ngroup group-b at " + servers) != std::string::npos);
  auto tl = Lines(t.out);
  REQUIRE(tl.size() == 10);
  for (size_t section = 0; section < 2; ++section) {
    const std::string group = order[section];
    const size_t at = section * 5;
    CHECK(tl[at].rfind("group " + group + " at " + servers + "  ", 0) == 0);
    CHECK(tl[at + 1].rfind("TOPIC", 0) == 0);
    for (int p = 0; p < 2; ++p) {
      auto w = Words(tl[at + 2 + p]);
      REQUIRE(w.size() >= 9);
      CHECK(w[1] == std::to_string(p));
      CHECK(w[2] == std::to_string(committed.at(group).at(p)));
      CHECK(w[4] == std::to_string(lag.at(group).at(p)));
      CHECK(w[8] == "OK");
    }
    CHECK(tl[at + 4].rfind("total lag " + std::to_string(section == 0 ? 4 : 3), 0) == 0);
  }

  // Without -b the config's brokers are used: nobody answers there.
  auto unreachable = Ef({"lag", "-c", config, "--group", "group-a", "--timeout", "2s"});
  CHECK(unreachable.code == 6);  // app::kExitUnreachable
  CHECK(unreachable.err.find(wrong) != std::string::npos);
}

TEST_CASE("lag of a group without committed offsets says so in one line and judges nothing",
          "[integration][lag]") {
  Stack stack(2);
  const std::string config = stack.WriteConfig();
  PartitionProducer producer(stack);
  producer.Send(0, NowMs() - 1200000);  // 20 minutes old: ERR for a group that lags
  producer.Send(1, NowMs());
  const std::string line =
      "group 'exposure-filtr' has no committed offsets on " + stack.topic() + ":";

  LagRead r = ReadLag(config, {"--group", "exposure-filtr"});
  INFO(r.doc.dump(2));
  CHECK(r.run.code == 0);
  CHECK(r.doc.at("group") == "exposure-filtr");
  CHECK(r.doc.at("status") == "NONE");
  CHECK(r.doc.at("no_committed_offsets") == json::array({stack.topic()}));
  CHECK(r.doc.at("message").get<std::string>().rfind(line, 0) == 0);
  CHECK(r.doc.at("lag_messages") == 0);  // not judged, not counted
  for (int p = 0; p < 2; ++p) {
    const json& part = PartitionOf(r.doc, p);
    CHECK(part.at("status") == "NONE");
    CHECK(part.at("committed_offset").is_null());
    CHECK(part.at("lag_seconds").is_null());
    CHECK(part.at("lag_messages") == 1);  // from the low watermark, as a new group would read
  }

  // The table: rows with STATUS NONE, no total, the line under it; no ERR anywhere.
  auto t = Ef({"lag", "-c", config, "--group", "exposure-filtr"});
  INFO(t.out << t.err);
  CHECK(t.code == 0);
  auto lines = Lines(t.out);
  REQUIRE(lines.size() == 5);  // title, header, 2 partitions, the line
  for (int p = 0; p < 2; ++p) {
    auto w = Words(lines[2 + p]);
    REQUIRE(w.size() >= 9);
    CHECK(w[2] == "-");
    CHECK(w[6] == "-");
    CHECK(w[8] == "NONE");
  }
  CHECK(lines[4].rfind(line, 0) == 0);
  CHECK(t.out.find("ERR") == std::string::npos);

  // --check fails on it, also beside a group that is fine.
  Commit(stack, stack.group(), {{0, 1}, {1, 1}});
  auto check =
      Ef({"lag", "-c", config, "--check", "--group", stack.group(), "--group", "exposure-filtr"});
  INFO(check.out << check.err);
  CHECK(check.code == 7);                                // app::kExitData
  CHECK(check.out.find("all OK") != std::string::npos);  // the configured group's section
  CHECK(check.out.find(line) != std::string::npos);
  CHECK(Ef({"lag", "-c", config, "--check"}).code == 0);  // the configured group alone
}

TEST_CASE("lag takes its thresholds and window from the config's metrics section and flags win",
          "[integration][lag]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig(
      "ef.yaml", "metrics:\n  freshness_target: 5s\n  freshness_limit: 30s\n  status_window: 4\n");
  PartitionProducer producer(stack);
  producer.Send(0, NowMs() - 45000);  // above the config's 30 s limit
  Commit(stack, stack.group(), {{0, 0}});

  LagRead r = ReadLag(config);
  INFO(r.doc.dump(2));
  CHECK(r.doc.at("freshness_target_seconds") == 5);
  CHECK(r.doc.at("freshness_limit_seconds") == 30);
  CHECK(r.doc.at("window_samples") == 4);
  CHECK(r.doc.at("stop_after_seconds") == 8);  // 4 samples x 2 s
  CHECK(PartitionOf(r.doc, 0).at("status") == "ERR");

  LagRead flags =
      ReadLag(config, {"--freshness-target", "7s", "--freshness-limit", "10m", "--samples", "3"});
  INFO(flags.doc.dump(2));
  CHECK(flags.doc.at("freshness_target_seconds") == 7);
  CHECK(flags.doc.at("freshness_limit_seconds") == 600);
  CHECK(flags.doc.at("window_samples") == 3);
  CHECK(PartitionOf(flags.doc, 0).at("status") == "WARN");

  auto t = Ef({"lag", "-c", config});
  CHECK(t.out.find("(single read; STOP after 8s without a commit)") != std::string::npos);
}

TEST_CASE(
    "lag --all-groups and --list-groups against the mock broker: one line saying it "
    "cannot list groups",
    "[integration][lag]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  const std::vector<std::vector<std::string>> cases = {
      {"--all-groups"},
      {"--all-groups", "--json"},
      {"--list-groups"},
      {"--all-groups", "--serve", "127.0.0.1:0"},
  };
  for (const auto& extra : cases) {
    std::vector<std::string> args = {"lag", "-c", config, "--timeout", "5s"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = Ef(args);
    INFO("lag " << extra.front() << " " << extra.size() << ": stdout " << r.out << "\nstderr "
                << r.err);
    CHECK(r.code == 3);  // app::kExitDenied: refused for good
    CHECK(r.out.empty());
    auto lines = Lines(r.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("the brokers at " + stack.kafka().bootstrap_servers() +
                        " cannot list consumer groups") != std::string::npos);
    CHECK(lines[0].find("name the groups with --group NAME") != std::string::npos);
  }
}

TEST_CASE("lag: usage errors in one line and no commits on an empty topic is no problem",
          "[integration][lag][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  const std::string kafka_port =
      stack.kafka().bootstrap_servers().substr(stack.kafka().bootstrap_servers().rfind(':') + 1);
  // The arguments, and a word the one line must contain.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--serve", "127.0.0.1:0", "--watch"}, "--watch"},
      {{"--serve", "127.0.0.1:0", "--check"}, "--check"},
      {{"--serve", "127.0.0.1:0", "--json"}, "--json"},
      {{"--all-groups", "--group", "g"}, "--group"},
      {{"--list-groups", "--watch"}, "--list-groups"},
      {{"--interval", "1s"}, "--interval"},
      {{"--watch", "1s", "--interval", "2s"}, "give the refresh interval once"},
      {{"--watch", "--interval", "50ms"}, "--interval 50ms: must be 100ms .. 1h"},
      {{"--serve", "127.0.0.1:0", "--interval", "0"}, "--interval"},
      {{"--serve", "nonsense"}, "--serve"},
      {{"--serve", "127.0.0.1:" + kafka_port},
       "--serve 127.0.0.1:" + kafka_port +
           ": address "
           "already in use"},
      {{"--freshness-limit", "soon"}, "--freshness-limit"},
  };
  for (const auto& [extra, word] : cases) {
    std::vector<std::string> args = {"lag", "-c", config};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = Ef(args, {}, "", 30s);
    INFO(extra.front() << " " << extra.back() << ": stdout " << r.out << "\nstderr " << r.err);
    CHECK(r.code == 2);  // app::kExitUsage
    CHECK(r.out.empty());
    auto lines = Lines(r.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].rfind("exposure-filter: ", 0) == 0);
    CHECK(lines[0].find(word) != std::string::npos);
  }
  {  // An empty topic: nothing to be behind on, so no commits is no problem.
    LagRead r = ReadLag(config, {"--group", "nobody", "--check"});
    INFO(r.doc.dump(2));
    CHECK(r.run.code == 0);
    CHECK(r.doc.at("status") == "OK");
    CHECK(r.doc.at("no_committed_offsets").empty());
  }
  auto h = Ef({"lag", "--help"});
  CHECK(h.code == 0);
  for (const char* word : {"-b,--brokers", "--group", "--all-groups", "--list-groups", "--serve",
                           "--interval", "metrics.freshness_target", "metrics.freshness_limit",
                           "metrics.status_window", "NONE", "/metrics"})
    CHECK(h.out.find(word) != std::string::npos);
}

TEST_CASE("lag --serve exports two groups with the daemon's metric names and a group label",
          "[integration][lag]") {
  Stack stack(2);
  const std::string config = stack.WriteConfig();
  const std::string topic = stack.topic();
  PartitionProducer producer(stack);
  producer.Send(0, NowMs());
  // group-a's first uncommitted message: 2 minutes old, WARN above a 60 s target.
  const int64_t oldest = producer.Send(0, NowMs() - 120000);
  for (int i = 0; i < 3; ++i) producer.Send(0, NowMs());
  for (int i = 0; i < 2; ++i) producer.Send(1, NowMs());
  Commit(stack, "group-a", {{0, 1}, {1, 2}});  // lag 4 and 0
  Commit(stack, "group-b", {{0, 5}, {1, 0}});  // lag 0 and 2

  Process serve({EF_BINARY,
                 "lag",
                 "-c",
                 config,
                 "--group",
                 "group-a",
                 "--group",
                 "group-b",
                 "--group",
                 "nobody",
                 "--serve",
                 "127.0.0.1:0",
                 "--interval",
                 "200ms",
                 "--timeout",
                 "2s",
                 "--freshness-target",
                 "60s",
                 "--freshness-limit",
                 "10m",
                 "--samples",  // a window that never fills here: no STALL while it runs
                 "1000"},
                stack.dir().File("lag-serve.log"));
  REQUIRE(WaitFor([&] { return ServePort(serve) > 0; }, 30s));
  const int port = ServePort(serve);
  INFO(serve.Output());
  std::vector<PromSample> m;
  auto scrape = [&] {
    HttpReply h = HttpGet(port, "/metrics");
    m = ParseProm(h.body);
    return h.status == 200;
  };
  auto labels = [&](const std::string& group, int partition) {
    return std::map<std::string, std::string>{
        {"group", group}, {"topic", topic}, {"partition", std::to_string(partition)}};
  };
  const std::string refreshed = "exposure_filter_lag_last_refresh_timestamp_seconds";
  REQUIRE(WaitFor(
      [&] {
        return scrape() && Value(m, refreshed, {{"group", "group-a"}}) &&
               Value(m, refreshed, {{"group", "group-b"}}) &&
               Value(m, refreshed, {{"group", "nobody"}});
      },
      30s));

  const std::map<std::string, std::map<int, int64_t>> lag = {{"group-a", {{0, 4}, {1, 0}}},
                                                             {"group-b", {{0, 0}, {1, 2}}}};
  const std::map<std::string, std::map<int, int64_t>> committed = {{"group-a", {{0, 1}, {1, 2}}},
                                                                   {"group-b", {{0, 5}, {1, 0}}}};
  const std::map<int, int64_t> high = {{0, 5}, {1, 2}};
  for (const auto& [group, by_partition] : lag) {
    for (const auto& [p, n] : by_partition) {
      INFO(group << " partition " << p);
      CHECK(Value(m, "exposure_filter_partition_lag_messages", labels(group, p)) == n);
      CHECK(Value(m, "exposure_filter_partition_committed_offset", labels(group, p)) ==
            committed.at(group).at(p));
      CHECK(Value(m, "exposure_filter_partition_high_watermark", labels(group, p)) == high.at(p));
      const bool warn = group == "group-a" && p == 0;
      for (const char* st : {"OK", "WARN", "STALL", "STOP", "ERR"}) {
        auto l = labels(group, p);
        l["status"] = st;
        CHECK(Value(m, "exposure_filter_partition_status", l) ==
              (std::string(st) == (warn ? "WARN" : "OK") ? 1 : 0));
      }
      if (n == 0) CHECK(Value(m, "exposure_filter_partition_lag_seconds", labels(group, p)) == 0);
    }
    CHECK(Value(m, "exposure_filter_lag_group_without_commits",
                {{"group", group}, {"topic", topic}}) == 0);
  }
  // The exact age of group-a's first uncommitted message at its refresh.
  auto lag_s = Value(m, "exposure_filter_partition_lag_seconds", labels("group-a", 0));
  REQUIRE(lag_s.has_value());
  CHECK(*lag_s * 1000 ==
        Approx(*Value(m, refreshed, {{"group", "group-a"}}) * 1000 - static_cast<double>(oldest))
            .margin(2));
  // A group without commits: said by its gauge, and no partition series.
  CHECK(Value(m, "exposure_filter_lag_group_without_commits",
              {{"group", "nobody"}, {"topic", topic}}) == 1);
  CHECK(CountFor(m, "exposure_filter_partition_lag_messages", "nobody") == 0);
  CHECK(CountFor(m, "exposure_filter_partition_status", "nobody") == 0);
  CHECK(Value(m, "exposure_filter_lag_refresh_errors_total") == 0);
  CHECK(HttpGet(port, "/healthz").status == 200);
  CHECK(HttpGet(port, "/readyz").status == 200);

  // group-a catches up: the next refreshes say so.
  Commit(stack, "group-a", {{0, 5}});
  REQUIRE(WaitFor(
      [&] {
        auto ok = labels("group-a", 0);
        ok["status"] = "OK";
        return scrape() &&
               Value(m, "exposure_filter_partition_lag_messages", labels("group-a", 0)) == 0 &&
               Value(m, "exposure_filter_partition_status", ok) == 1;
      },
      30s));

  // Kafka gone: errors are counted, /readyz is 503, the series keep their values.
  REQUIRE(stack.kafka().SetBrokerDown(-1).ok());
  REQUIRE(WaitFor(
      [&] {
        return scrape() && Value(m, "exposure_filter_lag_refresh_errors_total") >= 1 &&
               HttpGet(port, "/readyz").status == 503;
      },
      30s));
  CHECK(Value(m, "exposure_filter_partition_lag_messages", labels("group-b", 1)) == 2);
  CHECK(serve.Output().find("lag: cannot read group '") != std::string::npos);  // one line each
  REQUIRE(stack.kafka().SetBrokerUp(-1).ok());
  REQUIRE(WaitFor([&] { return HttpGet(port, "/readyz").status == 200; }, 60s));

  CHECK(serve.Stop(SIGTERM, 10s) == 0);
}

}  // namespace ef::test
