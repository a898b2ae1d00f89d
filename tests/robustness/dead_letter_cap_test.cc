// DeadLetterSink (pipeline/dead_letter.h) against a librdkafka mock cluster whose
// Produce requests fail (issue 26 item 13): the undelivered copies are counted
// in bytes, Full() turns true at kafka.dead_letter_max_pending_bytes (Ingest
// stops taking messages then: tests/unit/pipeline/ingest_test.cc), the copies stay held
// and their offsets uncommitted while the topic refuses them, and once it takes
// them again every copy is delivered, in the topic, and the memory is free.
#include <prometheus/registry.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "kafka/mock_cluster.h"
#include "kafka/source.h"
#include "metrics/ingest_metrics.h"
#include "pipeline/dead_letter.h"
#include "support/kafka_reader.h"

namespace ef {
namespace {

// librdkafka's NOT_ENOUGH_REPLICAS: retriable, the producer retries it by itself.
constexpr int kNotEnoughReplicas = 19;
constexpr int16_t kProduceApi = 0;

double GaugeValue(prometheus::Registry& registry, const std::string& name) {
  for (const auto& family : registry.Collect()) {
    if (family.name == name && !family.metric.empty()) return family.metric[0].gauge.value;
  }
  FAIL("no gauge " << name);
  return -1;
}

}  // namespace

TEST_CASE(
    "dead letter: copies the topic refuses stop at kafka.dead_letter_max_pending_bytes, "
    "and are all delivered once it takes them again",
    "[robustness][dead_letter]") {
  auto mc = MockCluster::Create(1);
  REQUIRE(mc.ok());
  MockCluster& kafka = **mc;
  REQUIRE(kafka.CreateTopic("dlq", 1).ok());
  // Every Produce request is refused (retriably) until the errors are cleared.
  kafka.PushRequestErrors(kProduceApi, std::vector<int>(100000, kNotEnoughReplicas));

  prometheus::Registry registry;
  IngestMetrics metrics(registry);
  KafkaConfig config;
  config.bootstrap_servers = kafka.bootstrap_servers();
  config.dead_letter_topic = "dlq";
  DeadLetterOptions options;
  constexpr size_t kCap = 64 * 1024;
  options.max_pending_bytes = kCap;
  auto created = DeadLetterSink::Create(config, options, &metrics);
  REQUIRE(created.ok());
  DeadLetterSink& sink = **created;

  // Rejected messages of 1000 bytes each, sent as Ingest does: until Full.
  const std::string topic = "exposures";
  const std::string payload(1000, 'x');
  const TopicPartition tp{topic, 0};
  int64_t sent = 0;
  size_t one_copy = 0;
  while (!sink.Full()) {
    REQUIRE(sent < 1000);
    Message m;
    m.topic = &topic;
    m.partition = 0;
    m.offset = sent++;
    m.payload = payload.data();
    m.len = payload.size();
    const size_t before = sink.outstanding_bytes();
    sink.Send(m, RejectReason::kNotJson);
    one_copy = sink.outstanding_bytes() - before;
  }
  INFO(sent << " copies of " << one_copy << " bytes each");
  CHECK(one_copy > payload.size());
  CHECK(one_copy < payload.size() + 1024);
  CHECK(sink.outstanding() == static_cast<size_t>(sent));
  CHECK(sink.outstanding_bytes() >= kCap);
  CHECK(sink.outstanding_bytes() < kCap + one_copy);
  CHECK(GaugeValue(registry, "exposure_filter_dead_letter_outstanding_bytes") ==
        static_cast<double>(sink.outstanding_bytes()));

  // Refused: nothing is delivered, the memory stays held, nothing is committable.
  CHECK_FALSE(sink.Flush(1000).ok());
  CHECK(sink.Full());
  CHECK(sink.outstanding() == static_cast<size_t>(sent));
  CHECK(sink.CommitLimit(tp) == 0);

  // The topic takes copies again: all delivered, the memory is free.
  kafka.ClearRequestErrors(kProduceApi);
  Status flushed = sink.Flush(60000);
  INFO(flushed.ToString());
  REQUIRE(flushed.ok());
  CHECK_FALSE(sink.Full());
  CHECK(sink.outstanding() == 0);
  CHECK(sink.outstanding_bytes() == 0);
  CHECK(sink.CommitLimit(tp) == INT64_MAX);
  CHECK(GaugeValue(registry, "exposure_filter_dead_letter_outstanding_bytes") == 0);
  const auto records = test::ReadTopic(kafka.bootstrap_servers(), "dlq");
  CHECK(records.size() == static_cast<size_t>(sent));
}

}  // namespace ef
