// The real parts an integration test needs, started on free ports: a
// redis-server, a librdkafka mock cluster with one topic, and helpers to write
// a daemon config, run `exposure-filter`, produce events and read the group's
// committed offsets.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "kafka/group_offsets.h"
#include "kafka/mock_cluster.h"
#include "kafka/producer.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/temp_dir.h"

namespace ef::test {

struct TestEvent {
  std::string user;
  std::vector<std::string> items;
  int64_t ts_ms = 0;
  std::string Json() const;
};

class Stack {
 public:
  // `brokers` mock brokers (ids 1..brokers); the topic replicated on
  // `replication` of them.
  explicit Stack(int partitions = 4, const std::string& topic = "exposures", int brokers = 1,
                 int replication = 1);
  // The same with a TLS-only redis-server; WriteConfig writes its redis.tls
  // block (the CA, and the client certificate when the server asks for one).
  explicit Stack(RedisTls tls, int partitions = 4);

  RedisServer& redis() { return redis_; }
  MockCluster& kafka() { return *kafka_; }
  const std::string& topic() const { return topic_; }
  const std::string& group() const { return group_; }
  TempDir& dir() { return dir_; }

  // A daemon config (YAML) for this stack; `extra` (YAML, e.g.
  // "filter:\n  items_per_bucket: 50\n") is merged in key by key, its values winning.
  std::string WriteConfig(const std::string& name = "ef.yaml", const std::string& extra = "");
  // `exposure-filter run -c <config> --set pipeline.commit_interval=200ms` in the
  // background, output to <dir>/<log> (the --set wins over the config's own).
  std::unique_ptr<Process> StartDaemon(const std::string& config_path,
                                       const std::string& log = "daemon.log");
  // StartDaemon, then waits until something is committed: the daemon is up and
  // writing. A test REQUIREs that within `timeout`, with the daemon still running
  // (its output in the failure message).
  std::unique_ptr<Process> StartDaemonAwaitingCommit(
      const std::string& config_path, const std::string& log = "daemon.log",
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Produces events (key = user) and waits for delivery.
  void Produce(const std::vector<TestEvent>& events);
  void ProduceRaw(const std::vector<std::string>& payloads, int64_t timestamp_ms = 0);
  // The same into another topic of this stack's Kafka (created with
  // kafka().CreateTopic first).
  void ProduceRawTo(const std::string& topic, const std::vector<std::string>& payloads,
                    int64_t timestamp_ms = 0);
  // Messages the test producer failed to deliver for good so far.
  uint64_t ProduceFailures() const { return producer_->failed(); }

  std::vector<PartitionOffsets> Offsets();
  // Committed == high watermark on every partition (and high > 0 somewhere).
  bool AllCommitted();
  int64_t TotalCommitted();
  // Waits until AllCommitted(); false at once if the daemon exits meanwhile.
  bool AwaitCommitted(Process& daemon, std::chrono::milliseconds timeout);

 private:
  TempDir dir_;
  RedisServer redis_;
  std::unique_ptr<MockCluster> kafka_;
  std::unique_ptr<KafkaProducer> producer_;
  std::string topic_;
  std::string group_;
  void Init(int partitions, int brokers, int replication);
  std::string TlsBlock() const;  // "  tls:\n    enabled: true\n..." or ""
};

// Count of "kafka: assigned N partition(s)" lines with N > 0 in a daemon log.
int AssignmentsWithPartitions(const std::string& log);

// A daemon config for `stack` with the given partition.assignment.strategy
// (range, roundrobin, cooperative-sticky) and the test's Kafka timings.
std::string WriteAssignmentConfig(Stack& stack, const std::string& strategy);

// `exposure-filter serve -c config` on 127.0.0.1:port with extra --set overrides,
// output to <dir>/<log>; returns once /healthz answers 200 (the test fails if it
// does not within 30 s, or serve exits).
std::unique_ptr<Process> StartServe(Stack& stack, const std::string& config, int port,
                                    const std::vector<std::string>& sets = {},
                                    const std::string& log = "serve.log");

// True iff consumer group `group` has committed every message of the stack's
// topic (committed == high watermark in each partition that has any, and some
// partition has); false on a Kafka error.
bool GroupCaughtUp(Stack& stack, const std::string& group);

// Items of `events` the filters do not report as seen now (false negatives),
// as "user/item".
std::vector<std::string> MissingItems(RedisConnection& conn, const Layout& layout,
                                      const std::vector<TestEvent>& events);

// Events for `users` users with `per_user` single- or list-form events each,
// item IDs "<tag>-i<n>", times spread over the last `days` days (not in the future).
std::vector<TestEvent> MakeEvents(const std::string& tag, int users, int per_user, int days,
                                  int64_t now_ms, uint64_t seed);

}  // namespace ef::test
