// Operator conventions (issue 50): precedence --set > environment > file, a
// warning for an unknown EXPOSURE_FILTER_* variable and for SASL settings
// without a SASL protocol, log.format json, and SIGHUP (a reload of log.* in
// run, serve and content; a stop like SIGTERM elsewhere). docs/CONFIG.md,
// docs/CLI.md#signals.
#include <signal.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_CASE("conventions: --set beats the environment which beats the file", "[integration][cli]") {
  TempDir dir;
  dir.Write("ef.yaml", "redis:\n  address: from-file:6379\n");
  const std::string config = dir.File("ef.yaml");
  const std::vector<std::string> env = {"EXPOSURE_FILTER_REDIS_ADDRESS=from-env:6379"};

  auto file_only = Ef({"config", "check", "-c", config}, {"EXPOSURE_FILTER_REDIS_ADDRESS="});
  INFO(file_only.err);
  REQUIRE(file_only.code == 0);
  CHECK(Contains(file_only.out, "address: from-file:6379"));

  auto with_env = Ef({"config", "check", "-c", config}, env);
  INFO(with_env.err);
  REQUIRE(with_env.code == 0);
  CHECK(Contains(with_env.out, "address: from-env:6379"));

  // `kubectl exec ... check --set redis.address=X` in a pod whose environment
  // names its own Redis: X wins.
  auto with_set = Ef({"config", "check", "-c", config, "--set", "redis.address=from-set:6379"}, env);
  INFO(with_set.err);
  REQUIRE(with_set.code == 0);
  CHECK(Contains(with_set.out, "address: from-set:6379"));
}

TEST_CASE("conventions: config check warns about an unknown variable and SASL without SASL",
          "[integration][cli]") {
  auto typo = Ef({"config", "check"}, {"EXPOSURE_FILTER_REDIS_ADRESS=foo"});
  INFO(typo.err);
  REQUIRE(typo.code == 0);  // a warning, not a refusal
  CHECK(Contains(typo.err,
                 "EXPOSURE_FILTER_REDIS_ADRESS is not a variable exposure-filter reads; it is "
                 "ignored (did you mean EXPOSURE_FILTER_REDIS_ADDRESS?)"));

  auto sasl = Ef({"config", "check"}, {"EXPOSURE_FILTER_KAFKA_SASL_PASSWORD=pw",
                                       "EXPOSURE_FILTER_KAFKA_SASL_USERNAME=ef"});
  INFO(sasl.err);
  REQUIRE(sasl.code == 0);
  CHECK(Contains(sasl.err,
                 "kafka.properties: sasl.password, sasl.username set but security.protocol is "
                 "unset (plaintext): Kafka is reached without SASL"));
  CHECK_FALSE(Contains(sasl.err + sasl.out, "pw\n"));

  auto wired = Ef({"config", "check"}, {"EXPOSURE_FILTER_KAFKA_SASL_PASSWORD=pw",
                                        "EXPOSURE_FILTER_KAFKA_SASL_USERNAME=ef",
                                        "EXPOSURE_FILTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL",
                                        "EXPOSURE_FILTER_KAFKA_SASL_MECHANISM=SCRAM-SHA-512"});
  INFO(wired.err);
  REQUIRE(wired.code == 0);
  CHECK_FALSE(Contains(wired.err, "warn"));
  CHECK(Contains(wired.out, "security.protocol: SASL_SSL"));
  CHECK(Contains(wired.out, "sasl.mechanism: SCRAM-SHA-512"));
}

// Every non-empty line of `text` as a JSON object (REQUIREs that each parses).
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    INFO("line: " << line);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    REQUIRE(j.is_object());
    out.push_back(j);
  }
  return out;
}

TEST_CASE("conventions: log.format json writes one object per line with fields",
          "[integration][cli]") {
  Stack stack(2);
  const std::string config = stack.WriteConfig(
      "ef.yaml", "log:\n  format: json\nmetrics:\n  listen: 127.0.0.1:" +
                     std::to_string(FreePort()) + "\n");
  Process run({EF_BINARY, "run", "-c", config}, stack.dir().File("run.log"));
  REQUIRE(WaitFor([&] { return !run.Running() || Contains(run.Output(), "kafka: assigned"); }, 60s));
  INFO(run.Output());
  REQUIRE(run.Running());

  // An error at start is a JSON line too: a second daemon with the same
  // metrics.listen exits 4.
  auto second = Ef({"run", "-c", config});
  INFO(second.err);
  CHECK(second.code == 4);
  const auto second_lines = JsonLines(second.err);
  REQUIRE_FALSE(second_lines.empty());
  CHECK(second_lines.back().value("level", "") == "error");
  CHECK(Contains(second_lines.back().value("message", ""), "address already in use"));

  CHECK(run.Stop(SIGTERM, 30s) == 0);
  const auto lines = JsonLines(run.Output());
  REQUIRE(lines.size() >= 3);
  bool assigned = false;
  for (const auto& j : lines) {
    CHECK(j.contains("time"));
    CHECK(j.contains("level"));
    CHECK(j.contains("message"));
    if (Contains(j.value("message", ""), "kafka: assigned")) {
      assigned = true;
      CHECK(Contains(j.value("partitions", ""), stack.topic()));
    }
  }
  CHECK(assigned);
}

TEST_CASE("conventions: SIGHUP reloads log.level in run and names keys that need a restart",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "log:\n  level: info\n");
  Process run({EF_BINARY, "run", "-c", config}, stack.dir().File("run.log"));
  REQUIRE(WaitFor([&] { return !run.Running() || Contains(run.Output(), "kafka: assigned"); }, 60s));
  REQUIRE(HandlesSignal(run.pid(), SIGHUP));

  stack.WriteConfig("ef.yaml", "log:\n  level: debug\nfilter:\n  fpr: 0.02\n");
  run.Signal(SIGHUP);
  REQUIRE(WaitFor([&] { return !run.Running() || Contains(run.Output(), "SIGHUP: reloaded"); }, 10s));
  INFO(run.Output());
  CHECK(Contains(run.Output(), "SIGHUP: reloaded " + config +
                                   ": log.level info -> debug; changed, applied at the next "
                                   "restart: filter.fpr"));
  REQUIRE(run.Running());

  // A config that no longer loads changes nothing, and says so.
  stack.WriteConfig("ef.yaml", "filter:\n  fpr: 2\n");
  run.Signal(SIGHUP);
  REQUIRE(WaitFor([&] { return !run.Running() || Contains(run.Output(), "does not load"); }, 10s));
  CHECK(Contains(run.Output(), "SIGHUP: " + config + " does not load, nothing changed: "));
  REQUIRE(run.Running());
  CHECK(run.Stop(SIGTERM, 30s) == 0);
}

TEST_CASE("conventions: SIGHUP reloads in serve and content and stops lag like SIGTERM",
          "[integration][cli]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml");
  const int port = FreePort();
  Process serve({EF_BINARY, "serve", "-c", config, "--set",
                 "serve.listen=127.0.0.1:" + std::to_string(port)},
                stack.dir().File("serve.log"));
  Process content({EF_BINARY, "content", "-c", config}, stack.dir().File("content.log"));
  for (Process* p : {&serve, &content}) {
    REQUIRE(WaitFor([&] { return !p->Running() || HandlesSignal(p->pid(), SIGHUP); }, 30s));
    INFO(p->Output());
    REQUIRE(p->Running());
    p->Signal(SIGHUP);
    REQUIRE(WaitFor([&] { return Contains(p->Output(), "SIGHUP: reloaded"); }, 10s));
    CHECK(Contains(p->Output(), "SIGHUP: reloaded " + config + ": log.* unchanged"));
    CHECK(p->Running());
    CHECK(p->Stop(SIGTERM, 30s) == 0);
  }

  // A command that does not reload stops as on SIGTERM: `lag --check --watch`
  // never finished its check, so 130 (docs/CLI.md#exit-codes).
  Process lag({EF_BINARY, "lag", "-c", config, "--watch", "0.5", "--samples", "1000", "--json",
               "--check"},
              stack.dir().File("lag.log"));
  REQUIRE(WaitFor([&] { return HandlesSignal(lag.pid(), SIGHUP); }, 30s));
  INFO(lag.Output());
  CHECK(lag.Stop(SIGHUP, 10s) == 130);
}

}  // namespace
}  // namespace ef::test
