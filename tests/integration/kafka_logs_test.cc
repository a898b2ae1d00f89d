// The daemon's log lines about Kafka (issue 27): each broker connection failure
// once, not once per librdkafka callback and handle, and a subscription named by
// its topics (no "/-1": a subscription list's partition is RD_KAFKA_PARTITION_UA).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

// Lines of `text` that contain `fragment`.
std::vector<std::string> LinesWith(const std::string& text, const std::string& fragment) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(fragment) != std::string::npos) out.push_back(line);
  return out;
}

bool IsDebug(const std::string& line) { return line.find(" debug ") != std::string::npos; }

}  // namespace

TEST_CASE("kafka logs: a dead bootstrap broker is reported once, the subscription by topic",
          "[integration][kafka][logs]") {
  Stack stack;
  // Debug level: the repeats (librdkafka's own log line of each attempt, from
  // each of the daemon's handles) show there, so the test can await them.
  const auto start = std::chrono::steady_clock::now();
  auto daemon =
      stack.StartDaemon(stack.WriteConfig("ef.yaml",
                                          "kafka:\n  bootstrap_servers: \"127.0.0.1:1\"\nlog:\n  "
                                          "level: debug\n"));
  const std::string failure = "Connect to ipv4#127.0.0.1:1 failed";
  // At least two attempts of each handle (consumer, watermark poller), and the
  // error callback's report.
  const bool retried =
      WaitFor([&] { return LinesWith(daemon->Output(), failure).size() >= 5; }, 30s);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const std::string log = daemon->Output();
  INFO("daemon log:\n" << log);
  REQUIRE(retried);
  std::vector<std::string> reported;
  for (const std::string& line : LinesWith(log, failure))
    if (!IsDebug(line)) reported.push_back(line);
  // Reported at most once per 10 s (kafka/log.h LogThrottled).
  CHECK(reported.size() >= 1);
  CHECK(reported.size() <= 1 + static_cast<size_t>(elapsed / 10s));
  CHECK(LinesWith(log, "brokers are down").size() >= 1);
  CHECK(LinesWith(log, "kafka: subscribed to topic " + stack.topic() + " as group").size() == 1);
  CHECK(LinesWith(log, "/-1").empty());
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

}  // namespace ef::test
