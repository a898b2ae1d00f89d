// README's "Example: one event, one query", run as written: its shell lines (the
// event through kcat, then `check --json`) against a real redis-server, the
// librdkafka mock cluster and the daemon started as scripts/quickstart.sh starts
// it; the output must be the one README shows, and so must serve's answer to
// the request README quotes. Needs kcat
// (scripts/install-deps.sh installs it).
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

struct ReadmeExample {
  std::vector<std::string> commands;  // the lines of the first ```sh block
  std::string output;                 // the first ```json block after it
  std::string request, response;      // "`POST /v1/filter` with `...` answers `...`"
};

// The section's first ```sh block and the first ```json block after it; empty
// when the section or a block is missing.
ReadmeExample ParseExample(const std::string& readme, const std::string& heading) {
  ReadmeExample example;
  std::istringstream in(readme);
  std::string line, prose;
  bool in_section = false;
  for (std::string fence; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == heading;
    if (!in_section) continue;
    prose += line + " ";
    if (fence.empty()) {
      if (line == "```sh" && example.commands.empty()) fence = "sh";
      if (line == "```json" && !example.commands.empty() && example.output.empty()) {
        fence = "json";
      }
      continue;
    }
    if (line == "```") {
      fence.clear();
      continue;
    }
    if (fence == "sh" && !line.empty()) example.commands.push_back(line);
    if (fence == "json") example.output += line;
  }
  std::smatch m;
  if (std::regex_search(prose, m,
                        std::regex("`POST /v1/filter` with `([^`]+)` answers `([^`]+)`"))) {
    example.request = m[1].str();
    example.response = m[2].str();
  }
  return example;
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace

TEST_CASE("readme: the example event and query give the output README shows", "[readme]") {
  using namespace std::chrono_literals;
  REQUIRE(RunCommand({"sh", "-c", "command -v kcat"}).code == 0);
  std::ifstream file(std::string(EF_SOURCE_DIR) + "/README.md");
  std::stringstream readme;
  readme << file.rdbuf();
  const auto example = ParseExample(readme.str(), "## Example: one event, one query");
  INFO("README example commands: " << example.commands.size() << ", output: " << example.output);
  REQUIRE(example.commands.size() == 2);
  REQUIRE(example.commands[0].find("kcat -P") != std::string::npos);
  REQUIRE(example.commands[1].find("build/exposure-filter check") != std::string::npos);
  REQUIRE(!example.output.empty());

  // The quick start's daemon: the shipped config, the stack's Kafka and Redis.
  Stack stack(4);
  const std::string bootstrap = stack.kafka().bootstrap_servers();
  const std::string redis = stack.redis().address();
  Process daemon(
      {EF_BINARY, "run", "-c", std::string(EF_SOURCE_DIR) + "/config/exposure-filter.yaml", "--set",
       "kafka.bootstrap_servers=" + bootstrap, "--set", "redis.address=" + redis, "--set",
       "metrics.listen=", "--set", "kafka.properties.session.timeout.ms=6000", "--set",
       "kafka.properties.fetch.wait.max.ms=10"},
      stack.dir().File("daemon.log"));
  const std::vector<std::string> env = {"BOOTSTRAP=" + bootstrap, "REDIS=" + redis};

  const auto produced = RunCommandWithEnv({"bash", "-c", example.commands[0]}, env);
  INFO("kcat: " << produced.out << produced.err);
  REQUIRE(produced.code == 0);

  std::string query = example.commands[1];
  query.replace(query.find("build/exposure-filter"), std::string("build/exposure-filter").size(),
                EF_BINARY);
  std::string last;
  const bool matched = WaitFor(
      [&] {
        const auto r = RunCommandWithEnv({"bash", "-c", query}, env);
        last = Trim(r.out) + (r.err.empty() ? "" : " / stderr: " + Trim(r.err));
        return r.code == 0 && Trim(r.out) == Trim(example.output);
      },
      60s, 250ms);
  INFO("last output of the query: " << last << "\ndaemon:\n" << daemon.Output());
  CHECK(matched);

  // The same question over HTTP: serve on the same Redis.
  INFO("README request: " << example.request << ", response: " << example.response);
  REQUIRE(!example.request.empty());
  const int port = FreePort();
  auto serve = StartServe(stack, stack.WriteConfig(), port);
  httplib::Client http("127.0.0.1", port);
  const auto answer = http.Post("/v1/filter", example.request, "application/json");
  REQUIRE(answer);
  CHECK(answer->status == 200);
  CHECK(Trim(answer->body) == example.response);
  CHECK(serve->Stop(SIGTERM, 30s) == 0);

  CHECK(daemon.Running());
  CHECK(daemon.Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test
