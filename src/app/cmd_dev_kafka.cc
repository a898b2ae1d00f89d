// exposure-filter dev-kafka: librdkafka's mock cluster in the foreground, for
// local runs and demos (no Kafka package or Docker needed).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>

#include "app/commands.h"
#include "app/common.h"
#include "kafka/mock_cluster.h"

namespace ef::app {
namespace {

struct DevKafkaArgs {
  int brokers = 1;
  std::vector<std::string> topics = {"exposures"};
  int partitions = 4;
  std::string bootstrap_file;
};

int DevKafka(const DevKafkaArgs& a) {
  SetUpLogging("info");
  InstallStopSignals();
  auto mc = MockCluster::Create(a.brokers);
  if (!mc.ok()) return Fail(mc.status());
  for (const auto& t : a.topics) {
    Status st = (*mc)->CreateTopic(t, a.partitions);
    if (!st.ok()) return Fail(st);
  }
  const std::string bootstraps = (*mc)->bootstrap_servers();
  if (!a.bootstrap_file.empty()) {
    std::string tmp = a.bootstrap_file + ".tmp";
    {
      std::ofstream f(tmp);
      f << bootstraps << "\n";
      if (!f)
        return Fail(InvalidArgument("--bootstrap-file " + a.bootstrap_file + ": cannot write"));
    }
    std::rename(tmp.c_str(), a.bootstrap_file.c_str());  // readers never see half a file
  }
  std::printf("%s\n", bootstraps.c_str());
  std::fflush(stdout);
  spdlog::info(
      "dev-kafka: {} broker(s) at {}; topic(s) with {} partition(s) each. This is "
      "librdkafka's mock cluster: data lives in memory (~5 MiB per partition), "
      "offsets-by-time are not supported. Ctrl-C to stop.",
      a.brokers, bootstraps, a.partitions);
  while (!StopRequested()) SleepUnlessStopped(1000);
  if (!a.bootstrap_file.empty()) std::remove(a.bootstrap_file.c_str());
  spdlog::info("dev-kafka: stopped");
  return kExitOk;
}

}  // namespace

Action AddDevKafkaCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "dev-kafka", "Run a development Kafka (librdkafka's mock cluster) in the foreground");
  cmd->footer(
      "In memory, for development and tests only. It keeps about 5 MiB of messages per "
      "partition and deletes the oldest past that, as a topic's retention would: a consumer "
      "further behind loses them (the daemon counts them in exposure_filter_messages_lost_total; "
      "`lag` shows them as LOST). No offsets by time, no SASL/SSL. docs/DEV-KAFKA.md.");
  auto a = std::make_shared<DevKafkaArgs>();
  cmd->add_option("--brokers", a->brokers, "Number of brokers")->check(CLI::Range(1, 16));
  cmd->add_option("--topic", a->topics, "Topic to create (repeatable)")->capture_default_str();
  cmd->add_option("--partitions", a->partitions, "Partitions per topic")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--bootstrap-file", a->bootstrap_file,
                  "Also write the bootstrap servers to this file (removed on exit)");
  return [a] { return DevKafka(*a); };
}

}  // namespace ef::app
