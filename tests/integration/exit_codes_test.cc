// The exit-code table (src/app/exit_codes.h, docs/CLI.md#exit-codes) row by row,
// from the real binary, for every command a row applies to: a usage error, a
// config error, a layout mismatch (a real redis-server holding another layout),
// an unreachable Redis or Kafka (a free port), a permission error (an ACL user
// whose password is wrong).
#include "app/exit_codes.h"

#include <librdkafka/rdkafka.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "config/config.h"
#include "redis/meta.h"
#include "redis/options.h"
#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

struct Command {
  std::string name;               // as the user types it
  std::vector<std::string> argv;  // after the binary, before -c
  std::vector<std::string> tail;  // after -c CONFIG and the --set overrides
};

// Every command the table covers, with the arguments that make it start work.
std::vector<Command> Commands() {
  return {
      {"run", {"run"}, {}},
      {"check", {"check"}, {"-u", "alice", "i1"}},
      {"serve", {"serve"}, {"--set", "serve.listen=127.0.0.1:" + std::to_string(FreePort())}},
      {"lag", {"lag"}, {"--timeout", "2s"}},
      {"replay", {"replay"}, {"--since", "1h", "--timeout", "2s"}},
      {"layout show", {"layout", "show"}, {}},
      {"size", {"size"}, {}},
      {"loadgen", {"loadgen"}, {"-n", "10", "-q"}},
  };
}

const Command& Find(const std::vector<Command>& all, const std::string& name) {
  for (const auto& c : all)
    if (c.name == name) return c;
  FAIL("no command " << name);
  return all.front();
}

SplitRunResult RunIt(const Command& c, const std::string& config,
                     const std::vector<std::string>& sets,
                     const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {EF_BINARY};
  argv.insert(argv.end(), c.argv.begin(), c.argv.end());
  if (!config.empty()) {
    argv.push_back("-c");
    argv.push_back(config);
  }
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  argv.insert(argv.end(), c.tail.begin(), c.tail.end());
  return RunCommandWithEnv(argv, env, "", 60s);
}

// The exit code is `code`, and the last line of stderr is the error, starting
// "exposure-filter" and naming `mention`.
void Expect(const std::string& row, const Command& c, const SplitRunResult& r, int code,
            const std::string& mention) {
  INFO(row << ": exposure-filter " << c.name << ": exit " << r.code << "\nstdout: " << r.out
           << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.code == code);
  std::string last;
  for (size_t end = r.err.size(); end > 0;) {
    const size_t start = r.err.rfind('\n', end - 1);
    const size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = r.err.substr(from, end - from);
    if (!line.empty() && line != "\n" && line != "Run with --help for more information.") {
      last = line;
      break;
    }
    if (start == std::string::npos) break;
    end = start;
  }
  CHECK(last.rfind("exposure-filter", 0) == 0);
  CHECK(last.find(mention) != std::string::npos);
}

}  // namespace

TEST_CASE("exit codes: every row of the table from the real binary", "[integration][cli]") {
  const auto all = Commands();

  SECTION("2 usage: an unknown option, with the exposure-filter: prefix") {
    for (const auto& c : all) {
      std::vector<std::string> argv = {EF_BINARY};
      argv.insert(argv.end(), c.argv.begin(), c.argv.end());
      argv.insert(argv.end(), c.tail.begin(), c.tail.end());  // the required options
      argv.push_back("--no-such-option");
      Expect("usage", c, RunCommandWithEnv(argv, {}, "", 30s), app::kExitUsage, "--no-such-option");
    }
  }

  SECTION("4 config: a config file that does not exist") {
    for (const auto& c : all)
      Expect("config", c, RunIt(c, "/nonexistent/ef.yaml", {}), app::kExitConfig,
             "/nonexistent/ef.yaml");
  }

  SECTION("4 config: filter targets no Bloom filter size can meet, before any connection") {
    // The check needs the layout arithmetic (bloom/layout.h CheckFilterSizing),
    // which config/ cannot include: every command still runs it.
    std::vector<Command> commands = all;
    // And the commands the table leaves out that load a config too.
    commands.push_back({"config check", {"config", "check"}, {}});
    commands.push_back({"layout upgrade", {"layout", "upgrade"}, {"--dry-run"}});
    commands.push_back({"layout stats", {"layout", "stats"}, {}});
    commands.push_back({"bench-redis", {"bench-redis"}, {}});
    for (const auto& c : commands)
      Expect("config", c, RunIt(c, "", {"filter.items_per_bucket=1000000000", "filter.fpr=1e-12"}),
             app::kExitConfig, "no usable Bloom filter size");
  }

  SECTION("5 layout mismatch: Redis holds the layout of another filter.fpr") {
    Stack stack(1);
    const std::string config = stack.WriteConfig();
    RedisOptions ro;
    ro.port = stack.redis().port();
    auto stored = LayoutFromConfig(FilterConfig{});
    REQUIRE(stored.ok());
    Layout effective;
    REQUIRE(EnsureMetaAt(ro, *stored, &effective).ok());
    for (const char* name : {"run", "check", "serve", "replay", "layout show"})
      Expect("layout", Find(all, name), RunIt(Find(all, name), config, {"filter.fpr=0.001"}),
             app::kExitLayout, "disagrees");
  }

  SECTION("5 layout: the meta key holds another type (another program's key at the prefix)") {
    // A permanent fault: no restart can help, so not 6 (which systemd restarts),
    // and `run` must not retry it for good.
    Stack stack(1);
    const std::string config = stack.WriteConfig();
    REQUIRE(stack.redis().Command({"SET", MetaKey(FilterConfig{}.key_prefix), "x"}).str == "OK");
    for (const char* name : {"run", "check", "serve", "replay", "layout show"})
      Expect("meta wrongtype", Find(all, name), RunIt(Find(all, name), config, {}),
             app::kExitLayout, "WRONGTYPE");
  }

  SECTION("6 unreachable: Redis or Kafka on a port where nothing listens") {
    Stack stack(1);
    const std::string config = stack.WriteConfig();
    const std::string nowhere = "127.0.0.1:" + std::to_string(FreePort());
    // Not serve: it starts without Redis and waits for it (issue 49; serve_test.cc).
    for (const char* name : {"check", "layout show"}) {
      const auto start = Clock::now();
      Expect(
          "unreachable redis", Find(all, name),
          RunIt(Find(all, name), config, {"redis.address=" + nowhere, "redis.connect_timeout=1s"}),
          app::kExitUnreachable, nowhere);
      CHECK(Clock::now() - start < 20s);
    }
    for (const char* name : {"lag", "replay", "loadgen"}) {
      const auto start = Clock::now();
      Expect("unreachable kafka", Find(all, name),
             RunIt(Find(all, name), config, {"kafka.bootstrap_servers=" + nowhere}),
             app::kExitUnreachable, nowhere);
      CHECK(Clock::now() - start < 20s);
    }
  }

  SECTION("3 permission: an ACL user whose password Redis refuses") {
    Stack stack(1);
    const std::string config = stack.WriteConfig();
    auto admin = stack.redis().Connect();
    auto acl = admin->Command({"ACL", "SETUSER", "ops", "on", ">right-pw", "~*", "&*", "+@all"});
    REQUIRE(acl.ok());
    REQUIRE(acl->str == "OK");
    const std::vector<std::string> env = {"EXPOSURE_FILTER_REDIS_PASSWORD=wrong-pw"};
    for (const char* name : {"run", "check", "serve", "replay", "layout show"})
      Expect("permission", Find(all, name),
             RunIt(Find(all, name), config, {"redis.username=ops"}, env), app::kExitDenied, "AUTH");
  }

  SECTION("3 denied: a topic the broker does not have (kafka.topic misspelt)") {
    // The table's row 3 names "unknown topic": `run` exits 3 after
    // kTopicMissingFatalMs (10 s); `lag` and `replay` read the topic's metadata at
    // once and must say the same (before: both exited 1).
    Stack stack(1);
    const std::string config = stack.WriteConfig();
    stack.kafka().SetTopicError("no-such-topic", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
    for (const char* name : {"lag", "replay", "run"})
      Expect("unknown topic", Find(all, name),
             RunIt(Find(all, name), config, {"kafka.topic=no-such-topic"}), app::kExitDenied,
             "no-such-topic");
  }
}

}  // namespace ef::test
