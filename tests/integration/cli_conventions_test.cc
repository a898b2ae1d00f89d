// The command-line conventions of docs/CLI.md on the real binary: "did you
// mean" for a mistyped command, --set taking one value per occurrence, the same
// duration and time forms everywhere, loadgen's -c/--set, range checks on
// numbers, and messages that say what happened (loadgen against a dead broker,
// lag and layout stats in human units).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "capacity/size_report.h"
#include "common/clock.h"
#include "common/duration.h"
#include "kafka/producer.h"
#include "support/group_commit.h"
#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line != "Run with --help for more information.") out.push_back(line);
  return out;
}

// Exit code `code`, nothing on stdout, one error line (besides CLI11's hint)
// holding every one of `mentions`, starting "exposure-filter: ".
void ExpectError(const SplitRunResult& r, int code, const std::vector<std::string>& mentions) {
  INFO("exit " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == code);
  CHECK(r.out.empty());
  const auto lines = Lines(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("exposure-filter: ", 0) == 0);
  for (const auto& m : mentions) {
    INFO("expected: " << m);
    CHECK(lines[0].find(m) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("cli conventions: a mistyped command gets did-you-mean and the usage code",
          "[integration][cli]") {
  ExpectError(Ef({"rnu"}), app::kExitUsage,
              {"exposure-filter: unknown command 'rnu'; did you mean 'run'?"});
  ExpectError(Ef({"layout", "shwo"}), app::kExitUsage,
              {"unknown command 'layout shwo'; did you mean 'layout show'?"});
  // Nothing close: the commands are listed instead.
  ExpectError(Ef({"frobnicate"}), app::kExitUsage, {"unknown command 'frobnicate'", "run, check"});
}

TEST_CASE("cli conventions: --set takes one value per occurrence, not the arguments after it",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  // The items after --set KEY=VALUE are check's items.
  auto r = Ef({"check", "-c", config, "-u", "alice", "--set", "filter.fpr=0.01", "i1", "i2"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out == "unseen  i1\nunseen  i2\n");
  // Still repeatable.
  auto two = Ef({"config", "check", "--set", "filter.fpr=0.02", "--set", "log.level=warn"});
  INFO(two.err);
  REQUIRE(two.code == 0);
  CHECK(two.out.find("fpr: 0.02") != std::string::npos);
  CHECK(two.out.find("level: warn") != std::string::npos);
}

TEST_CASE("cli conventions: every duration option takes 3s, and plain numbers keep their unit",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  for (const char* timeout : {"3s", "3", "2500ms"}) {
    auto r = Ef({"replay", "-c", config, "--since", "1h", "--dry-run", "--timeout", timeout});
    INFO("replay --timeout " << timeout << ": " << r.err);
    CHECK(r.code == 0);
  }
  ExpectError(Ef({"replay", "-c", config, "--since", "1h", "--timeout", "3x"}), app::kExitUsage,
              {"--timeout", "3x"});
  // lag --watch: a duration, or plain seconds (fractions too) as before.
  for (const char* watch : {"200ms", "0.2"}) {
    auto r = Ef({"lag", "-c", config, "--check", "--watch", watch, "--samples", "2"});
    INFO("lag --watch " << watch << ": " << r.out << r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("refresh 0.2 s") != std::string::npos);
  }
  ExpectError(Ef({"lag", "-c", config, "--watch", "0"}), app::kExitUsage, {"--watch"});
  // loadgen --spread (docs/CLI.md "Durations"): the same forms.
  for (const char* spread : {"3d", "0.5", "2"}) {
    auto r = Ef({"loadgen", "-c", config, "-n", "5", "-q", "--spread", spread});
    INFO("loadgen --spread " << spread << ": " << r.out << r.err);
    CHECK(r.code == 0);
  }
  ExpectError(Ef({"loadgen", "-c", config, "-n", "5", "-q", "--spread", "3x"}), app::kExitUsage,
              {"--spread", "3x"});
}

TEST_CASE("cli conventions: check --at takes replay's time forms and rejects 0",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  for (const char* at : {"2h", "2026-11-22T08:00:00Z", "2026-11-22", "@1795305600"}) {
    auto r = Ef({"check", "-c", config, "-u", "alice", "--at", at, "i1"});
    INFO("--at " << at << ": " << r.err);
    CHECK(r.code == 0);
    CHECK(r.out == "unseen  i1\n");
  }
  // 0 used to mean "now"; a bare number is ambiguous (seconds ago or epoch?).
  ExpectError(Ef({"check", "-c", config, "-u", "alice", "--at", "0", "i1"}), app::kExitUsage,
              {"--at", "'0'"});
  ExpectError(Ef({"check", "-c", config, "-u", "alice", "--at", "1795305600", "i1"}),
              app::kExitUsage, {"--at", "@1795305600"});
  ExpectError(Ef({"check", "-c", config, "-u", "alice", "--at", "@0", "i1"}), app::kExitUsage,
              {"--at"});
}

TEST_CASE("cli conventions: size --users 0 and out-of-range numbers are one-line usage errors",
          "[integration][cli]") {
  ExpectError(Ef({"size", "--users", "0"}), app::kExitUsage, {"--users", "0"});
  ExpectError(Ef({"size", "--users", "99999999999999999999"}), app::kExitUsage,
              {"--users", "99999999999999999999"});
  ExpectError(Ef({"size", "--users", "-5"}), app::kExitUsage, {"--users"});
  auto ok = Ef({"size", "--users", "18446744073709551615"});
  CHECK(ok.code == 0);
}

TEST_CASE("cli conventions: loadgen reads kafka settings from -c and --set like the others",
          "[integration][cli]") {
  Stack stack(2);
  const std::string config = stack.WriteConfig();
  auto r =
      Ef({"loadgen", "-c", config, "--set", "kafka.properties.linger.ms=1", "-n", "200", "-q"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out).at("delivered").get<int64_t>() == 200);
  int64_t high = 0;
  for (const auto& po : stack.Offsets()) high += po.high;
  CHECK(high == 200);
  // A property librdkafka refuses is a config error naming it.
  ExpectError(Ef({"loadgen", "-c", config, "--set", "kafka.properties.no.such.property=1", "-n",
                  "1", "-q"}),
              app::kExitConfig, {"no.such.property"});
}

TEST_CASE("cli conventions: loadgen against a dead broker fails fast naming it",
          "[integration][cli]") {
  const std::string nowhere = "127.0.0.1:" + std::to_string(FreePort());
  const auto start = Clock::now();
  auto r = Ef({"loadgen", "-b", nowhere, "-n", "10", "-q"});
  const auto took = Clock::now() - start;
  INFO("exit " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == app::kExitUnreachable);
  CHECK(took < 20s);
  // One error line naming the brokers; the summary on stdout counts the failures.
  const auto lines = Lines(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("exposure-filter: kafka " + nowhere, 0) == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("delivered") == 0);
  CHECK(j.at("failed") == 10);
}

TEST_CASE("cli conventions: lag shows durations in human form, JSON keeps seconds",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  ProducerOptions po;
  po.bootstrap_servers = stack.kafka().bootstrap_servers();
  auto producer = KafkaProducer::Create(po);
  REQUIRE(producer.ok());
  const int64_t age_ms = ((1 * 24 + 19) * 3600 + 44 * 60 + 45) * 1000LL;  // 1d 19h 44m 45s
  const int64_t ts = SystemClock().NowMs() - age_ms;
  TestEvent e{"u1", {"i1"}, ts};
  REQUIRE((*producer)->Produce(stack.topic(), 0, e.user, e.Json(), ts).ok());
  REQUIRE((*producer)->Flush(10000).ok());
  // The group committed the partition's start: the event is its lag (a group
  // with no commit at all is not judged, docs/LAG.md).
  Commit(stack, stack.group(), {{0, 0}});
  auto human = Ef({"lag", "-c", config});
  INFO("stdout: " << human.out << "\nstderr: " << human.err);
  CHECK(human.out.find("1d 19h 44m") != std::string::npos);
  CHECK(human.out.find("157485") == std::string::npos);
  auto json = Ef({"lag", "-c", config, "--json"});
  INFO(json.out);
  const double secs = nlohmann::json::parse(json.out).at("lag_seconds").get<double>();
  CHECK(secs >= age_ms / 1000.0);
  CHECK(secs < age_ms / 1000.0 + 60);
}

TEST_CASE("cli conventions: layout stats prints human units, JSON raw bytes",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  stack.Produce(MakeEvents("stats", 20, 3, 1, SystemClock().NowMs(), 5));
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  auto json = Ef({"layout", "stats", "-c", config, "--json"});
  REQUIRE(json.code == 0);
  const auto j = nlohmann::json::parse(json.out);
  const auto value_bytes = j.at("value_bytes").get<uint64_t>();
  REQUIRE(value_bytes > 1024);
  auto human = Ef({"layout", "stats", "-c", config});
  INFO(human.out);
  REQUIRE(human.code == 0);
  CHECK(human.out.find(FormatBytesHuman(value_bytes)) != std::string::npos);
  CHECK(human.out.find(std::to_string(value_bytes)) == std::string::npos);
  CHECK(std::regex_search(human.out, std::regex("used_memory [0-9.]+ MiB")));
}

// Issue 27: serve once advised "set allow_missing_layout", which is no config
// key. Every "set KEY" (dotted or snake_case) in a string literal of src/ must
// name a key `config check` prints (or a kafka.properties.* entry).
TEST_CASE("cli conventions: every key a message tells to set is a config key",
          "[integration][cli]") {
  auto dump = Ef({"config", "check"});
  REQUIRE(dump.code == 0);
  std::set<std::string> keys;
  std::string section, block;  // block: "redis.tls" for the keys nested under "  tls:"
  for (const auto& line : Lines(dump.out)) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex(R"(^(\w+):\s*$)"))) section = m[1];
    if (std::regex_match(line, m, std::regex(R"(^  (\w+):.*$)"))) {
      keys.insert(section + "." + m[1].str());
      block = section + "." + m[1].str();
    }
    if (std::regex_match(line, m, std::regex(R"(^    (\w+):.*$)")))
      keys.insert(block + "." + m[1].str());
  }
  REQUIRE(keys.count("filter.key_prefix") == 1);
  const std::regex literal(R"re("((?:[^"\\]|\\.)*)")re");
  const std::regex advice(R"(\bset `?([a-z]+(?:\.[a-z_]+)+|[a-z]+_[a-z_]+))");
  size_t checked = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(std::string(EF_SOURCE_DIR) + "/src")) {
    const auto ext = entry.path().extension();
    if (ext != ".cc" && ext != ".h") continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      for (auto it = std::sregex_iterator(line.begin(), line.end(), literal);
           it != std::sregex_iterator(); ++it) {
        const std::string text = (*it)[1];
        for (auto a = std::sregex_iterator(text.begin(), text.end(), advice);
             a != std::sregex_iterator(); ++a) {
          const std::string key = (*a)[1];
          INFO(entry.path().string() << ": \"" << text << "\" tells to set " << key);
          CHECK((keys.count(key) == 1 || key.rfind("kafka.properties.", 0) == 0));
          ++checked;
        }
      }
    }
  }
  CHECK(checked >= 5);  // the scan found the advice it is meant to check
}

}  // namespace ef::test
