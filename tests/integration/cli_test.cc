// The command line on real parts: bad input, `config check`, `size`, Redis ACL
// authentication, the dead-letter topic, an unreachable Redis, `loadgen` and
// `dev-kafka`. Every test runs the built exposure-filter binary as a child
// process against a real redis-server and librdkafka's mock cluster over TCP.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "kafka/group_offsets.h"
#include "read/bloom_reader.h"
#include "redis/connection.h"
#include "support/kafka_reader.h"
#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// CLI11's exit codes (CLI::ExitCodes) for the parse errors below; the
// project's own usage code is 2 and is accepted as well.
constexpr int kUsage = 2;
constexpr int kConfig = 4;       // app::kExitConfig
constexpr int kUnreachable = 6;  // app::kExitUnreachable
constexpr int kCli11RequiredError = 106;
constexpr int kCli11ExtrasError = 109;

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  return lines;
}

// The lines of stderr that report the error: all of them but CLI11's hint.
std::vector<std::string> ErrorLines(const std::string& err) {
  std::vector<std::string> out;
  for (auto& l : NonEmptyLines(err))
    if (l != "Run with --help for more information.") out.push_back(l);
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t CountLinesContaining(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (const auto& l : NonEmptyLines(text)) n += Contains(l, needle);
  return n;
}

// Asserts a CLI failure: exit code in `codes`, nothing on stdout, exactly one
// error line on stderr, and that line holds every one of `mentions`.
void ExpectOneLineError(const SplitRunResult& r, const std::set<int>& codes,
                        const std::vector<std::string>& mentions) {
  INFO("exit code " << r.code << "\nstdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(codes.count(r.code) == 1);
  CHECK(r.out.empty());
  const auto lines = ErrorLines(r.err);
  REQUIRE(lines.size() == 1);
  for (const auto& m : mentions) {
    INFO("expected in the error line: " << m);
    CHECK(Contains(lines[0], m));
  }
}

// `exposure-filter run` as a child with the test stack's defaults, extra
// --set overrides and extra environment entries (through env(1), which execs
// the daemon in place: signals reach it directly).
std::unique_ptr<Process> StartRun(Stack& stack, const std::string& config,
                                  const std::vector<std::string>& sets,
                                  const std::vector<std::string>& env, const std::string& log) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), env.begin(), env.end());
  for (const std::string& a :
       {std::string(EF_BINARY), std::string("run"), std::string("-c"), config, std::string("--set"),
        std::string("pipeline.commit_interval=200ms")})
    argv.push_back(a);
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  return std::make_unique<Process>(argv, stack.dir().File(log));
}

Layout DefaultLayout() {
  auto l = LayoutFromConfig(FilterConfig{});
  REQUIRE(l.ok());
  return l.value();
}

std::vector<std::string> Missing(RedisConnection& conn, const std::vector<TestEvent>& events) {
  return MissingItems(conn, DefaultLayout(), events);
}

int64_t SumHigh(const std::vector<PartitionOffsets>& offsets) {
  int64_t total = 0;
  for (const auto& po : offsets) total += std::max<int64_t>(po.high, 0);
  return total;
}

std::string Trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// Contract v1, rule 5, recomputed here from the brief's formulas.
struct ExpectedSizing {
  uint64_t buckets, m, k;
  long double p_b;
};
ExpectedSizing ContractSizing(int64_t n, double p, int64_t window_s, int64_t bucket_s) {
  ExpectedSizing e;
  e.buckets = static_cast<uint64_t>(window_s / bucket_s + 1);
  e.p_b = 1.0L - std::pow(1.0L - static_cast<long double>(p), 1.0L / e.buckets);
  const long double ln2 = std::log(2.0L);
  const long double m_real = -static_cast<long double>(n) * std::log(e.p_b) / (ln2 * ln2);
  // Inputs are chosen away from an integer, so rounding noise cannot move the ceil.
  const long double frac = m_real - std::floor(m_real);
  REQUIRE(frac > 1e-6L);
  REQUIRE(frac < 1 - 1e-6L);
  e.m = static_cast<uint64_t>(std::ceil(m_real));
  e.k = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::llround(static_cast<long double>(e.m) / n * ln2)));
  return e;
}

// "  m, bits per bucket key      3,345" -> 3345 (digits of the value column).
uint64_t ReportNumber(const std::string& report, const std::string& label) {
  for (const auto& line : NonEmptyLines(report)) {
    const size_t pos = line.find_first_not_of(' ');
    if (line.compare(pos, label.size(), label) != 0) continue;  // the label starts the line
    std::string digits;
    for (size_t i = pos + label.size(); i < line.size(); ++i) {
      char c = line[i];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digits.push_back(c);
      } else if (c == ',' || (c == ' ' && digits.empty())) {
        continue;
      } else {
        break;
      }
    }
    INFO("report line: " << line);
    REQUIRE_FALSE(digits.empty());
    return std::stoull(digits);
  }
  FAIL("no line '" << label << "' in the report:\n" << report);
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// 1. Bad input at the command line.

TEST_CASE("cli: an unknown subcommand is a usage error with one line", "[integration][cli]") {
  auto r = Ef({"frobnicate"});
  ExpectOneLineError(r, {kUsage, kCli11RequiredError, kCli11ExtrasError}, {});
}

// src/app/cli.cc: with require_subcommand(1, 1) CLI11 reports the missing
// subcommand before the unexpected argument, so the line reads "A subcommand is
// required" and never names the word the user typed.
TEST_CASE("cli: an unknown subcommand is named in the error", "[integration][cli]") {
  auto r = Ef({"frobnicate"});
  ExpectOneLineError(r, {kUsage, kCli11RequiredError, kCli11ExtrasError}, {"frobnicate"});
}

TEST_CASE("cli: run with a missing config file names the file and why", "[integration][cli]") {
  auto r = Ef({"run", "-c", "/nonexistent.yaml"});
  ExpectOneLineError(r, {kConfig}, {"/nonexistent.yaml", "No such file"});
}

TEST_CASE("cli: a config with an unknown key names the file, line and key", "[integration][cli]") {
  TempDir dir;
  dir.Write("bad.yaml",
            "kafka:\n"
            "  topic: exposures\n"
            "filter:\n"
            "  fpr: 0.01\n"
            "  fprr: 0.02\n"  // line 5
            "log:\n"
            "  level: info\n");
  const std::string path = dir.File("bad.yaml");
  SECTION("run") {
    ExpectOneLineError(Ef({"run", "-c", path}), {kConfig},
                       {path + ":5:", "filter.fprr", "did you mean 'filter.fpr'"});
  }
  SECTION("config check") {
    ExpectOneLineError(Ef({"config", "check", "-c", path}), {kConfig},
                       {path + ":5:", "filter.fprr"});
  }
}

TEST_CASE("cli: --set with an out-of-range fpr names the override and the value",
          "[integration][cli]") {
  SECTION("run") {
    ExpectOneLineError(Ef({"run", "--set", "filter.fpr=2"}), {kConfig}, {"--set filter.fpr", "2"});
  }
  SECTION("config check") {
    ExpectOneLineError(Ef({"config", "check", "--set", "filter.fpr=2"}), {kConfig},
                       {"--set filter.fpr", "2"});
  }
  SECTION("size") {
    ExpectOneLineError(Ef({"size", "--set", "filter.fpr=2"}), {kConfig}, {"--set filter.fpr", "2"});
  }
}

TEST_CASE("cli: size with a malformed --window names the option and the text",
          "[integration][cli]") {
  ExpectOneLineError(Ef({"size", "--window", "7x"}), {kUsage}, {"--window", "7x"});
}

// `size --fpr 0`: CLI::Range(0.0, 1.0) lets 0 through and cmd_size.cc treats
// a zero --fpr as "not given", so the default filter.fpr is used silently.
TEST_CASE("cli: size --fpr 0 is rejected, not replaced by the default", "[integration][cli]") {
  auto r = Ef({"size", "--fpr", "0"});
  ExpectOneLineError(r, {kUsage, 105 /* CLI::ValidationError */}, {"--fpr", "0"});
}

// loadgen's brokers come from the config now (-c, --set, -b): only check's
// --user is required.
TEST_CASE("cli: check without --user is a usage error naming the option", "[integration][cli]") {
  ExpectOneLineError(Ef({"check", "i1"}), {kUsage}, {"--user"});
}

TEST_CASE("cli: --help on every subcommand exits 0 and prints its usage", "[integration][cli]") {
  const std::vector<std::vector<std::string>> commands = {
      {},         {"run"}, {"check"}, {"size"}, {"config"}, {"config", "check"}, {"dev-kafka"},
      {"loadgen"}};
  for (const auto& cmd : commands) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    auto r = Ef(args);
    std::string name = "exposure-filter";
    for (const auto& c : cmd) name += " " + c;
    INFO(name << " --help\nstdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.code == 0);
    CHECK(Contains(r.out, "Usage:"));
    CHECK(Contains(r.out, "--help"));
    // The usage line names the subcommand itself.
    if (!cmd.empty()) CHECK(Contains(r.out, cmd.back()));
  }
  // And the options each one documents.
  CHECK(Contains(Ef({"check", "--help"}).out, "--user"));
  CHECK(Contains(Ef({"loadgen", "--help"}).out, "--brokers"));
  CHECK(Contains(Ef({"loadgen", "--help"}).out, "--config"));
  CHECK(Contains(Ef({"size", "--help"}).out, "--fpr"));
  CHECK(Contains(Ef({"dev-kafka", "--help"}).out, "--bootstrap-file"));
  CHECK(Contains(Ef({"run", "--help"}).out, "--config"));
}

// ---------------------------------------------------------------------------
// 2. config check.

TEST_CASE("cli: config check prints every section of the sample config, reloadably",
          "[integration][cli]") {
  const std::string sample = std::string(EF_SOURCE_DIR) + "/config/exposure-filter.yaml";
  auto r = Ef({"config", "check", "-c", sample}, {"EXPOSURE_FILTER_REDIS_PASSWORD="});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  for (const char* section : {"kafka", "redis", "filter", "events", "pipeline", "metrics", "log"}) {
    INFO("section " << section);
    CHECK(std::regex_search(r.out, std::regex(std::string("(^|\n)") + section + ":")));
  }
  for (const char* key : {"bootstrap_servers", "dead_letter_topic", "write_mode",
                          "items_per_bucket", "max_future", "commit_interval", "listen", "level"})
    CHECK(Contains(r.out, std::string(key) + ":"));
  CHECK(Contains(r.err, "valid"));

  // The printed config is itself a valid config that prints the same.
  TempDir dir;
  dir.Write("effective.yaml", r.out);
  auto again = Ef({"config", "check", "-c", dir.File("effective.yaml")},
                  {"EXPOSURE_FILTER_REDIS_PASSWORD="});
  INFO("second pass stderr: " << again.err);
  CHECK(again.code == 0);
  CHECK(again.out == r.out);
}

TEST_CASE("cli: config check masks passwords from the environment", "[integration][cli]") {
  const std::string sample = std::string(EF_SOURCE_DIR) + "/config/exposure-filter.yaml";
  const std::string redis_secret = "Redis-Pw-9f3a7c";
  const std::string sasl_secret = "Sasl-Pw-51be20";
  auto r =
      Ef({"config", "check", "-c", sample}, {"EXPOSURE_FILTER_REDIS_PASSWORD=" + redis_secret,
                                             "EXPOSURE_FILTER_KAFKA_SASL_PASSWORD=" + sasl_secret});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK_FALSE(Contains(r.out + r.err, redis_secret));
  CHECK_FALSE(Contains(r.out + r.err, sasl_secret));
  // redis.password and kafka.properties sasl.password are present, masked.
  CHECK(std::regex_search(r.out, std::regex("\n  password: [\"']?\\*\\*\\*[\"']?\n")));
  CHECK(std::regex_search(r.out, std::regex("sasl\\.password: [\"']?\\*\\*\\*[\"']?")));

  // Without the variable there is nothing to mask: the password stays empty.
  auto plain = Ef({"config", "check", "-c", sample}, {"EXPOSURE_FILTER_REDIS_PASSWORD="});
  REQUIRE(plain.code == 0);
  CHECK_FALSE(Contains(plain.out, "***"));
}

// ---------------------------------------------------------------------------
// 3. size: the contract's formulas.

TEST_CASE("cli: size figures match the contract's sizing formulas", "[integration][cli]") {
  struct Input {
    int64_t n;
    double p;
    std::string window, bucket;
    int64_t window_s, bucket_s;
    uint64_t users;
  };
  const std::vector<Input> inputs = {
      {200, 0.01, "30d", "1d", 30 * 86400, 86400, 1000000},
      {50, 0.001, "7d", "6h", 7 * 86400, 6 * 3600, 12345},
      {1000, 0.05, "2d", "1h", 2 * 86400, 3600, 7},
  };
  for (const auto& in : inputs) {
    const ExpectedSizing e = ContractSizing(in.n, in.p, in.window_s, in.bucket_s);
    const uint64_t bytes_per_bucket = (e.m + 7) / 8;
    std::ostringstream p;
    p << in.p;
    const std::vector<std::string> args = {"size",
                                           "-n",
                                           std::to_string(in.n),
                                           "--fpr",
                                           p.str(),
                                           "--window",
                                           in.window,
                                           "--bucket",
                                           in.bucket,
                                           "--users",
                                           std::to_string(in.users)};
    INFO("n=" << in.n << " p=" << in.p << " window=" << in.window << " bucket=" << in.bucket
              << " -> expected m=" << e.m << " k=" << e.k << " B=" << e.buckets);

    auto text = Ef(args);
    INFO("text report:\n" << text.out << text.err);
    REQUIRE(text.code == 0);
    CHECK(ReportNumber(text.out, "m, bits per bucket key") == e.m);
    CHECK(ReportNumber(text.out, "k, hash positions") == e.k);
    CHECK(ReportNumber(text.out, "buckets per query (B)") == e.buckets);
    CHECK(ReportNumber(text.out, "per user per bucket") == bytes_per_bucket);
    CHECK(ReportNumber(text.out, "per user per window") == bytes_per_bucket * e.buckets);
    CHECK(ReportNumber(text.out, "total for all users") == bytes_per_bucket * e.buckets * in.users);

    std::vector<std::string> json_args = args;
    json_args.push_back("--json");
    auto js = Ef(json_args);
    INFO("json report:\n" << js.out << js.err);
    REQUIRE(js.code == 0);
    auto j = nlohmann::json::parse(js.out);
    CHECK(j.at("contract_version").get<int>() == 3);  // filter.layout_version 3 by default
    CHECK(j.at("m").get<uint64_t>() == e.m);
    CHECK(j.at("k").get<uint64_t>() == e.k);
    CHECK(j.at("buckets").get<uint64_t>() == e.buckets);
    CHECK(j.at("items_per_bucket").get<int64_t>() == in.n);
    CHECK(j.at("fpr").get<double>() == Approx(in.p));
    CHECK(j.at("window_seconds").get<int64_t>() == in.window_s);
    CHECK(j.at("bucket_seconds").get<int64_t>() == in.bucket_s);
    CHECK(j.at("users").get<uint64_t>() == in.users);
    CHECK(j.at("bucket_fpr_target").get<double>() ==
          Approx(static_cast<double>(e.p_b)).epsilon(1e-9));
    CHECK(j.at("bytes_per_user_per_bucket").get<uint64_t>() == bytes_per_bucket);
    CHECK(j.at("bytes_per_user_per_window").get<uint64_t>() == bytes_per_bucket * e.buckets);
    CHECK(j.at("total_bytes").get<uint64_t>() == bytes_per_bucket * e.buckets * in.users);
    // The rounded m and k still meet the per-bucket target (within rounding).
    const double expected_b = j.at("bucket_fpr_expected").get<double>();
    CHECK(expected_b <= static_cast<double>(e.p_b) * 1.05);
  }
}

// ---------------------------------------------------------------------------
// 4. Redis with ACL.

TEST_CASE("cli: run and check authenticate as an ACL user, and a wrong password is a clear error",
          "[integration][cli]") {
  Stack stack(2);
  const std::string password = "s3cret";
  auto admin = stack.redis().Connect();  // stays authenticated as the default user
  auto acl =
      admin->Command({"ACL", "SETUSER", "efuser", "on", ">" + password, "~*", "&*", "+@all"});
  REQUIRE(acl.ok());
  REQUIRE(acl->str == "OK");
  auto pass = admin->Command({"CONFIG", "SET", "requirepass", "other-Admin-pw"});
  REQUIRE(pass.ok());
  REQUIRE(pass->str == "OK");
  RedisOptions anonymous;
  anonymous.port = stack.redis().port();
  auto anon = RedisConnection::Connect(anonymous);
  REQUIRE_FALSE(anon.ok());  // the default user can no longer act without a password
  CHECK(Contains(anon.status().message(), "NOAUTH"));

  const int64_t now = SystemClock().NowMs();
  auto events = MakeEvents("acl", 20, 5, 1, now, 11);
  stack.Produce(events);
  const std::string config = stack.WriteConfig();
  const std::vector<std::string> as_efuser = {"redis.username=efuser"};

  SECTION("the right password: events are written and committed") {
    auto daemon = StartRun(stack, config, as_efuser, {"EXPOSURE_FILTER_REDIS_PASSWORD=" + password},
                           "acl.log");
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
    REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
    CHECK_FALSE(Contains(daemon->Output(), password));

    RedisOptions efuser;
    efuser.port = stack.redis().port();
    efuser.username = "efuser";
    efuser.password = password;
    auto conn = RedisConnection::Connect(efuser);
    REQUIRE(conn.ok());
    CHECK(Missing(**conn, events).empty());
    auto meta = (*conn)->Command({"HGET", "ef:meta", "version"});
    REQUIRE(meta.ok());
    CHECK(meta->str == "3");  // a fresh deployment: layout version 3 (filter.layout_version)

    const TestEvent& e = events.front();
    auto r = Ef({"check", "-c", config, "--set", "redis.username=efuser", "-u", e.user, "--json",
                 e.items.front(), "never-shown-item"},
                {"EXPOSURE_FILTER_REDIS_PASSWORD=" + password});
    INFO("check stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.code == 0);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("seen") == nlohmann::json::array({e.items.front()}));
    CHECK(j.at("unseen") == nlohmann::json::array({"never-shown-item"}));
  }

  SECTION(
      "a wrong password: run exits 3 (refused) and check fails, each with one line naming AUTH") {
    const std::string wrong = "Wr0ng-pw-b7";
    auto daemon = StartRun(stack, config, as_efuser, {"EXPOSURE_FILTER_REDIS_PASSWORD=" + wrong},
                           "wrong.log");
    auto code = daemon->Wait(30s);
    const std::string log = daemon->Output();
    INFO("daemon log:\n" << log);
    REQUIRE(code.has_value());
    CHECK(*code == 3);  // kExitDenied: a restart loop would not help
    CHECK(CountLinesContaining(log, "AUTH") == 1);
    const auto lines = NonEmptyLines(log);
    REQUIRE_FALSE(lines.empty());
    CHECK(Contains(lines.back(), "AUTH"));  // the final word, not buried mid-log
    CHECK(Contains(lines.back(), stack.redis().address()));
    CHECK_FALSE(Contains(log, wrong));
    CHECK(stack.TotalCommitted() == 0);

    auto r = Ef({"check", "-c", config, "--set", "redis.username=efuser", "-u", "u1", "i1"},
                {"EXPOSURE_FILTER_REDIS_PASSWORD=" + wrong});
    INFO("check stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.code != 0);
    CHECK(r.out.empty());
    const auto err = ErrorLines(r.err);
    REQUIRE(err.size() == 1);
    CHECK(Contains(err[0], "AUTH"));
    CHECK(Contains(err[0], stack.redis().address()));
    CHECK_FALSE(Contains(r.err, wrong));
  }
}

// Issue 9, defect 6: an ACL that refuses the writes (NOPERM) used to be retried
// for ever, the daemon running and committing nothing. It is final: exit 3.
TEST_CASE("cli: an ACL user without write permission makes run exit 3 with one line naming NOPERM",
          "[integration][cli][readiness]") {
  Stack stack(2);
  auto admin = stack.redis().Connect();
  // Every write command of every write mode refused (auto writes dense keys with
  // MULTI/BITOP, sparse ones with BITFIELD).
  auto acl = admin->Command({"ACL", "SETUSER", "reader", "on", ">pw-r3ader", "~*", "&*", "+@all",
                             "-bitfield", "-setbit", "-bitop", "-multi"});
  REQUIRE(acl.ok());
  REQUIRE(acl->str == "OK");
  const int64_t now = SystemClock().NowMs();
  stack.Produce(MakeEvents("noperm", 5, 2, 1, now, 12));
  auto daemon = StartRun(stack, stack.WriteConfig(), {"redis.username=reader"},
                         {"EXPOSURE_FILTER_REDIS_PASSWORD=pw-r3ader"}, "noperm.log");
  auto code = daemon->Wait(60s);
  const std::string log = daemon->Output();
  INFO("daemon log:\n" << log);
  REQUIRE(code.has_value());
  CHECK(*code == 3);
  const auto lines = NonEmptyLines(log);
  REQUIRE_FALSE(lines.empty());
  CHECK(Contains(lines.back(), "NOPERM"));
  CHECK(stack.TotalCommitted() == 0);
}

// ---------------------------------------------------------------------------
// 5. The dead-letter topic.

TEST_CASE("cli: bad events go to the dead-letter topic unchanged, with reason and source headers",
          "[integration][cli]") {
  Stack stack(2);
  const std::string dlq = "exposures-dlq";
  REQUIRE(stack.kafka().CreateTopic(dlq, 1).ok());
  const int64_t now = SystemClock().NowMs();
  const std::string ts = std::to_string(now);
  // payload -> expected reason
  const std::map<std::string, std::string> bad = {
      {"not json at all", "not_json"},
      {std::string("\0\1\2\xff", 4), "not_json"},
      {"{\"item_id\": \"dlq-x1\", \"ts\": " + ts + "}", "missing_user"},
      {"{\"user_id\": \"dlq-u9\", \"ts\": " + ts + "}", "missing_item"},
      {"{\"user_id\": \"\", \"item_id\": \"dlq-x2\", \"ts\": " + ts + "}", "empty_user"},
  };
  std::vector<std::string> bad_payloads;
  for (const auto& [payload, reason] : bad) bad_payloads.push_back(payload);
  auto good_before = MakeEvents("dlq-a", 10, 3, 1, now, 21);
  auto good_after = MakeEvents("dlq-b", 10, 3, 1, now, 22);
  stack.Produce(good_before);
  stack.ProduceRaw(bad_payloads);
  stack.Produce(good_after);

  auto daemon =
      StartRun(stack, stack.WriteConfig(), {"kafka.dead_letter_topic=" + dlq}, {}, "dlq.log");
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  const std::string log = daemon->Output();
  INFO("daemon log:\n" << log);
  CHECK(Contains(log, std::to_string(bad.size()) + " rejected"));

  // Where each bad payload sits in the source topic.
  std::map<std::string, std::string> source_of;
  for (const auto& rec : ReadTopic(stack.kafka().bootstrap_servers(), stack.topic())) {
    if (bad.count(rec.payload))
      source_of[rec.payload] =
          stack.topic() + "/" + std::to_string(rec.partition) + "/" + std::to_string(rec.offset);
  }
  REQUIRE(source_of.size() == bad.size());

  // Committed offsets imply the copies were delivered: no waiting here.
  const auto copies = ReadTopic(stack.kafka().bootstrap_servers(), dlq);
  CHECK(copies.size() == bad.size());
  std::set<std::string> copied;
  for (const auto& rec : copies) {
    INFO("dead letter at offset " << rec.offset << ": " << rec.payload);
    auto it = bad.find(rec.payload);
    REQUIRE(it != bad.end());  // byte for byte one of the bad payloads
    copied.insert(rec.payload);
    CHECK(rec.Header("exposure-filter-reason") == it->second);
    CHECK(rec.Header("exposure-filter-source") == source_of[rec.payload]);
  }
  CHECK(copied.size() == bad.size());

  auto conn = stack.redis().Connect();
  CHECK(Missing(*conn, good_before).empty());
  CHECK(Missing(*conn, good_after).empty());
  for (const auto& po : stack.Offsets()) {
    INFO("partition " << po.tp.partition);
    CHECK(po.committed == po.high);
  }
}

// ---------------------------------------------------------------------------
// 6. An unreachable Redis.

TEST_CASE("cli: check against a closed Redis port fails fast with one line naming the address",
          "[integration][cli]") {
  const std::string address = "127.0.0.1:" + std::to_string(FreePort());
  const auto start = Clock::now();
  auto r = Ef({"check", "--set", "redis.address=" + address, "-u", "alice", "i1"}, {}, "", 30s);
  const auto took = Clock::now() - start;
  ExpectOneLineError(r, {kUnreachable}, {address});
  CHECK(took < 10s);
}

TEST_CASE("cli: run against an unreachable Redis keeps retrying and stops at once on SIGTERM",
          "[integration][cli]") {
  Stack stack(1);
  const int port = FreePort();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> sets = {"redis.address=" + address};
  const std::string config = stack.WriteConfig();

  SECTION("SIGTERM while waiting exits 0 promptly") {
    // Bounds with room for a loaded machine: the exit within 10 s (expected:
    // well under 1 s; between attempts the daemon waits at most 5 s), and a
    // daemon that went on retrying after the SIGTERM fails the 30 s wait.
    auto daemon = StartRun(stack, config, sets, {}, "unreachable.log");
    REQUIRE(WaitFor([&] { return CountLinesContaining(daemon->Output(), address) > 0; }, 30s));
    CHECK(daemon->Running());
    const auto start = Clock::now();
    daemon->Signal(SIGTERM);
    auto code = daemon->Wait(30s);
    const auto took = Clock::now() - start;
    const std::string log = daemon->Output();
    INFO("daemon log:\n" << log);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(took < 10s);
    CHECK(CountLinesContaining(log, "retrying") == 1);  // logged once, not per attempt
  }

  SECTION("once Redis appears on the address it goes on and writes") {
    const int64_t now = SystemClock().NowMs();
    auto events = MakeEvents("late", 10, 4, 1, now, 31);
    stack.Produce(events);
    auto daemon = StartRun(stack, config, sets, {}, "late.log");
    REQUIRE(WaitFor([&] { return CountLinesContaining(daemon->Output(), "retrying") > 0; }, 30s));
    CHECK(daemon->Running());
    CHECK(stack.TotalCommitted() == 0);

    TempDir redis_dir;
    Process redis({"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir",
                   redis_dir.path(), "--save", "", "--appendonly", "no"},
                  redis_dir.File("redis.log"));
    REQUIRE(stack.AwaitCommitted(*daemon, 60s));
    REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
    const std::string log = daemon->Output();
    INFO("daemon log:\n" << log);
    CHECK(CountLinesContaining(log, "retrying") == 1);
    CHECK(Contains(log, "layout checked"));

    RedisOptions o;
    o.port = port;
    auto conn = RedisConnection::Connect(o);
    REQUIRE(conn.ok());
    CHECK(Missing(**conn, events).empty());
    redis.Stop(SIGKILL, 10s);
  }
}

// ---------------------------------------------------------------------------
// 7. loadgen and dev-kafka.

TEST_CASE("cli: loadgen produces exactly -n events and prints a JSON summary",
          "[integration][cli]") {
  Stack stack(3);
  const int64_t n = 1234;
  auto r = Ef({"loadgen", "-b", stack.kafka().bootstrap_servers(), "-t", stack.topic(), "-n",
               std::to_string(n), "-q"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  const auto lines = NonEmptyLines(r.out);
  REQUIRE(lines.size() == 1);
  auto j = nlohmann::json::parse(lines[0]);
  CHECK(j.at("events").get<int64_t>() == n);
  CHECK(j.at("delivered").get<int64_t>() == n);
  CHECK(j.at("failed").get<int64_t>() == 0);
  CHECK(j.at("bad_events").get<int64_t>() == 0);
  CHECK(j.contains("seconds"));
  CHECK(j.contains("events_per_second"));
  CHECK(SumHigh(stack.Offsets()) == n);

  // What it wrote is what the daemon reads: every event decodes and is committed.
  auto daemon = stack.StartDaemon(stack.WriteConfig());
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);
  INFO("daemon log:\n" << daemon->Output());
  CHECK(Contains(daemon->Output(), "stopped: " + std::to_string(n) + " messages"));
  CHECK(Contains(daemon->Output(), " 0 rejected"));
}

TEST_CASE("cli: dev-kafka writes a connectable bootstrap file and removes it on SIGTERM",
          "[integration][cli]") {
  TempDir dir;
  const std::string file = dir.File("bootstrap.txt");
  Process broker({EF_BINARY, "dev-kafka", "--partitions", "2", "--bootstrap-file", file},
                 dir.File("dev-kafka.log"));
  REQUIRE(WaitFor([&] { return std::filesystem::exists(file) || !broker.Running(); }, 30s));
  INFO("dev-kafka log:\n" << broker.Output());
  REQUIRE(broker.Running());
  const std::string bootstrap = Trim(dir.Read("bootstrap.txt"));
  CHECK(
      std::regex_match(bootstrap, std::regex("127\\.0\\.0\\.1:[0-9]+(,127\\.0\\.0\\.1:[0-9]+)*")));

  const int64_t n = 300;
  auto r = Ef({"loadgen", "-b", bootstrap, "-n", std::to_string(n), "-q"});
  INFO("loadgen stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out).at("delivered").get<int64_t>() == n);

  KafkaConfig kc;
  kc.bootstrap_servers = bootstrap;
  kc.topics = {"exposures"};
  kc.group_id = "ef-cli-test-dev-kafka";
  auto offsets = ReadGroupOffsets(kc, 10000);
  REQUIRE(offsets.ok());
  CHECK(offsets->size() == 2);
  CHECK(SumHigh(*offsets) == n);
  const auto records = ReadTopic(bootstrap, "exposures");
  REQUIRE(static_cast<int64_t>(records.size()) == n);
  CHECK(nlohmann::json::parse(records.front().payload).contains("user_id"));

  CHECK(broker.Stop(SIGTERM, 10s) == 0);
  CHECK_FALSE(std::filesystem::exists(file));
  CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
}

// Issue 9 (minor): `size --bucket 90m` printed a layout that `run` rejects.
// `size` now sends --bucket/--window/-n/--fpr through the config loader's own
// field rules and Validate, so it rejects exactly what `run` rejects, with the
// same reason after the option name.
TEST_CASE("cli: size rejects the bucket and window spans that run rejects for the same reason",
          "[integration][cli]") {
  // The reason: the error line after "<option or key>: ".
  auto reason = [](const SplitRunResult& r, const std::string& after) {
    const auto lines = ErrorLines(r.err);
    if (lines.size() != 1) return std::string();
    const size_t pos = lines[0].find(after);
    return pos == std::string::npos ? std::string() : lines[0].substr(pos + after.size());
  };
  struct Bad {
    std::string option, key, value;
  };
  const std::vector<Bad> rejected = {
      {"--bucket", "filter.bucket", "90m"},     {"--bucket", "filter.bucket", "5h"},
      {"--bucket", "filter.bucket", "25h"},     {"--bucket", "filter.bucket", "30m"},
      {"--bucket", "filter.bucket", "1500ms"},  {"--window", "filter.window", "30m"},
      {"--window", "filter.window", "90000ms"},
  };
  for (const Bad& b : rejected) {
    INFO(b.option << " " << b.value << " / --set " << b.key << "=" << b.value);
    const auto run = Ef({"run", "--set", b.key + "=" + b.value});
    ExpectOneLineError(run, {kConfig}, {"--set " + b.key});
    const auto size = Ef({"size", b.option, b.value});
    ExpectOneLineError(size, {kUsage}, {b.option});
    const std::string run_reason = reason(run, b.key + ": ");
    CHECK_FALSE(run_reason.empty());
    CHECK(reason(size, b.option + ": ") == run_reason);
  }

  // A window that is not a multiple of the bucket: the cross-field check.
  const auto run = Ef({"run", "--set", "filter.window=36h", "--set", "filter.bucket=1d"});
  ExpectOneLineError(run, {kConfig}, {"filter.window", "filter.bucket"});
  const auto size = Ef({"size", "--window", "36h", "--bucket", "1d"});
  ExpectOneLineError(size, {kUsage}, {"filter.window", "filter.bucket"});
  CHECK(ErrorLines(size.err) == ErrorLines(run.err));

  // What `run` accepts, `size` accepts (config check loads as run does).
  for (const char* bucket : {"1h", "3h", "8h", "12h", "1d", "2d"}) {
    INFO("--bucket " << bucket);
    const auto check = Ef({"config", "check", "--set", std::string("filter.bucket=") + bucket});
    INFO(check.err);
    CHECK(check.code == 0);
    const auto ok = Ef({"size", "--bucket", bucket});
    INFO(ok.err);
    CHECK(ok.code == 0);
    CHECK(Contains(ok.out, "buckets per query (B)"));
  }
}

TEST_CASE("cli: size --activity shows the distribution, and a bad one is a one-line usage error",
          "[integration][cli]") {
  auto r = Ef({"size", "--activity", "zipf:1.1", "--users", "10000000"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(Contains(r.out, "bit-layout contract v3"));
  CHECK(Contains(r.out, "64x items_per_bucket"));
  CHECK(Contains(r.out, "users at the stage limit"));
  CHECK(Contains(Ef({"size", "--set", "filter.layout_version=2"}).out, "bit-layout contract v2"));
  CHECK(Contains(Ef({"size", "--set", "filter.layout_version=2", "--set", "filter.stages=1"}).out,
                 "bit-layout contract v1"));
  CHECK(Contains(Ef({"size", "--set", "filter.stages=1"}).out, "bit-layout contract v3"));
  CHECK(Contains(Ef({"size", "--help"}).out, "--activity"));
  ExpectOneLineError(Ef({"size", "--activity", "0.5:60,1:25"}), {kUsage}, {"--activity", "85%"});
  ExpectOneLineError(Ef({"size", "--activity", "4:x"}), {kUsage}, {"--activity", "'x'"});
}

}  // namespace ef::test

namespace ef::test {

// Issue 27: `config check` passed what `run` and `serve` then refused.
TEST_CASE("cli: config check rejects what run and serve reject, with the same line",
          "[integration][cli]") {
  // librdkafka's own validation of kafka.properties.
  const auto check = Ef({"config", "check", "--set", "kafka.properties.security.protocol=bogus"});
  ExpectOneLineError(check, {kConfig}, {"security.protocol", "bogus"});
  const auto run = Ef({"run", "--set", "kafka.properties.security.protocol=bogus", "--set",
                       "redis.address=127.0.0.1:1", "--set", "redis.connect_timeout=100ms"});
  INFO("run: " << run.err);
  CHECK(run.code == kConfig);
  // Cross-key rules: serve.listen must differ from metrics.listen, for every command.
  for (const std::string command : {"config check", "serve", "run"}) {
    std::vector<std::string> argv;
    std::istringstream words(command);
    for (std::string w; words >> w;) argv.push_back(w);
    argv.insert(argv.end(),
                {"--set", "metrics.listen=127.0.0.1:9555", "--set", "serve.listen=127.0.0.1:9555"});
    INFO(command);
    ExpectOneLineError(Ef(argv), {kConfig}, {"serve.listen", "metrics.listen"});
  }
}

}  // namespace ef::test
