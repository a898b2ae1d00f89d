#include "support/stack.h"

#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>

#include "common/clock.h"
#include "kafka/group_offsets.h"
#include "read/bloom_reader.h"
#include "redis/meta.h"
#include "support/wait.h"

namespace ef::test {

std::string TestEvent::Json() const {
  nlohmann::json j;
  j["user_id"] = user;
  if (items.size() == 1) {
    j["item_id"] = items[0];
  } else {
    j["items"] = items;
  }
  j["ts"] = ts_ms;
  return j.dump();
}

Stack::Stack(int partitions, const std::string& topic, int brokers, int replication)
    : topic_(topic) {
  Init(partitions, brokers, replication);
}

Stack::Stack(RedisTls tls, int partitions) : redis_(std::move(tls)), topic_("exposures") {
  Init(partitions, 1, 1);
}

void Stack::Init(int partitions, int brokers, int replication) {
  static int counter = 0;
  group_ = "ef-test-" + std::to_string(getpid()) + "-" + std::to_string(++counter);
  auto mc = MockCluster::Create(brokers);
  if (!mc.ok()) throw std::runtime_error(mc.status().message());
  kafka_ = std::move(mc.value());
  Status st = kafka_->CreateTopic(topic_, partitions, replication);
  if (!st.ok()) throw std::runtime_error(st.message());
  ProducerOptions po;
  po.bootstrap_servers = kafka_->bootstrap_servers();
  // Learn moved leaders within a second, also while a broker is down (fault tests).
  po.properties["topic.metadata.refresh.interval.ms"] = "1000";
  auto p = KafkaProducer::Create(po);
  if (!p.ok()) throw std::runtime_error(p.status().message());
  producer_ = std::move(p.value());
}

std::string Stack::TlsBlock() const {
  if (!redis_.tls()) return "";
  const TlsOptions t = redis_.ClientOptions().tls;
  std::string block = "  tls:\n    enabled: true\n    ca_file: \"" + t.ca_file + "\"\n";
  if (!t.cert_file.empty())
    block += "    cert_file: \"" + t.cert_file + "\"\n    key_file: \"" + t.key_file + "\"\n";
  return block;
}

std::string Stack::WriteConfig(const std::string& name, const std::string& extra) {
  std::string yaml =
      "kafka:\n"
      "  bootstrap_servers: \"" +
      kafka_->bootstrap_servers() +
      "\"\n"
      "  topic: " +
      topic_ +
      "\n"
      "  group_id: " +
      group_ +
      "\n"
      "  properties:\n"
      "    session.timeout.ms: 6000\n"
      "    fetch.wait.max.ms: 10\n"
      "redis:\n"
      "  address: \"" +
      redis_.address() +
      "\"\n"
      "  retry_backoff_min: 50ms\n"
      "  retry_backoff_max: 500ms\n" +
      TlsBlock() +
      "metrics:\n"
      "  listen: \"\"\n"
      "content:\n"
      "  listen: \"\"\n";
  // `extra` is merged key by key into the sections above (its values win).
  YAML::Node merged = YAML::Load(yaml);
  YAML::Node more = YAML::Load(extra);
  if (more.IsMap()) {
    for (const auto& section : more) {
      const std::string name_of_section = section.first.as<std::string>();
      if (!merged[name_of_section] || !section.second.IsMap()) {
        merged[name_of_section] = section.second;
        continue;
      }
      YAML::Node target = merged[name_of_section];
      for (const auto& kv : section.second) target[kv.first.as<std::string>()] = kv.second;
    }
  }
  YAML::Emitter out;
  out << merged;
  dir_.Write(name, out.c_str());
  return dir_.File(name);
}

std::unique_ptr<Process> Stack::StartDaemon(const std::string& config_path,
                                            const std::string& log) {
  return std::make_unique<Process>(
      std::vector<std::string>{EF_BINARY, "run", "-c", config_path, "--set",
                               "pipeline.commit_interval=200ms"},
      dir_.File(log));
}

std::unique_ptr<Process> Stack::StartDaemonAwaitingCommit(const std::string& config_path,
                                                          const std::string& log,
                                                          std::chrono::milliseconds timeout) {
  auto daemon = StartDaemon(config_path, log);
  const bool started = WaitFor([&] { return !daemon->Running() || TotalCommitted() > 0; }, timeout);
  INFO(daemon->Output());
  REQUIRE(started);
  REQUIRE(daemon->Running());
  return daemon;
}

void Stack::Produce(const std::vector<TestEvent>& events) {
  for (const auto& e : events) {
    Status st = producer_->Produce(topic_, -1, e.user, e.Json(), e.ts_ms);
    if (!st.ok()) throw std::runtime_error(st.message());
  }
  Status st = producer_->Flush(30000);
  if (!st.ok()) throw std::runtime_error(st.message());
}

void Stack::ProduceRaw(const std::vector<std::string>& payloads, int64_t timestamp_ms) {
  ProduceRawTo(topic_, payloads, timestamp_ms);
}

void Stack::ProduceRawTo(const std::string& topic, const std::vector<std::string>& payloads,
                         int64_t timestamp_ms) {
  for (const auto& p : payloads) {
    Status st = producer_->Produce(topic, -1, "raw", p, timestamp_ms);
    if (!st.ok()) throw std::runtime_error(st.message());
  }
  Status st = producer_->Flush(30000);
  if (!st.ok()) throw std::runtime_error(st.message());
}

std::vector<PartitionOffsets> Stack::Offsets() {
  KafkaConfig kc;
  kc.bootstrap_servers = kafka_->bootstrap_servers();
  kc.topics = {topic_};
  kc.group_id = group_;
  auto r = ReadGroupOffsets(kc, 5000);
  if (!r.ok()) throw std::runtime_error(r.status().message());
  return r.value();
}

bool Stack::AllCommitted() {
  int64_t total = 0;
  for (const auto& po : Offsets()) {
    if (po.high > 0 && po.committed != po.high) return false;
    total += po.high;
  }
  return total > 0;
}

bool Stack::AwaitCommitted(Process& daemon, std::chrono::milliseconds timeout) {
  if (WaitFor([&] { return !daemon.Running() || AllCommitted(); }, timeout) && daemon.Running())
    return true;
  // Show why in the test output: the daemon's log.
  std::fprintf(stderr, "--- daemon log (not all committed) ---\n%s\n---\n",
               daemon.Output().c_str());
  return false;
}

int64_t Stack::TotalCommitted() {
  int64_t total = 0;
  for (const auto& po : Offsets()) total += std::max<int64_t>(po.committed, 0);
  return total;
}

int AssignmentsWithPartitions(const std::string& log) {
  int count = 0;
  for (size_t pos = log.find("kafka: assigned "); pos != std::string::npos;
       pos = log.find("kafka: assigned ", pos + 1)) {
    if (std::atoi(log.c_str() + pos + 16) > 0) ++count;
  }
  return count;
}

std::string WriteAssignmentConfig(Stack& stack, const std::string& strategy) {
  return stack.WriteConfig(
      "ef.yaml",
      "kafka:\n  properties:\n    session.timeout.ms: 6000\n    fetch.wait.max.ms: 10\n"
      "    partition.assignment.strategy: " +
          strategy + "\n");
}

bool GroupCaughtUp(Stack& stack, const std::string& group) {
  KafkaConfig kc;
  kc.bootstrap_servers = stack.kafka().bootstrap_servers();
  kc.topics = {stack.topic()};
  kc.group_id = group;
  auto offsets = ReadGroupOffsets(kc, 5000);
  if (!offsets.ok()) return false;
  int64_t total = 0;
  for (const auto& po : *offsets) {
    if (po.high > 0 && po.committed != po.high) return false;
    total += po.high;
  }
  return total > 0;
}

std::vector<std::string> MissingItems(RedisConnection& conn, const Layout& layout,
                                      const std::vector<TestEvent>& events) {
  std::map<std::string, std::vector<std::string>> by_user;
  for (const auto& e : events)
    for (const auto& i : e.items) by_user[e.user].push_back(i);
  // As a reader does: the stored layout (its version and v3_from), if any.
  Layout stored;
  bool found = false;
  if (Status st = ReadLayout(conn, layout, &stored, &found); !st.ok())
    throw std::runtime_error(st.message());
  BloomReader reader(conn, found ? stored : layout);
  const int64_t now_s = SystemClock().NowMs() / 1000;
  std::vector<std::string> missing;
  for (const auto& [user, items] : by_user) {
    auto r = reader.Check(user, items, now_s);
    if (!r.ok()) throw std::runtime_error(r.status().message());
    for (size_t i = 0; i < items.size(); ++i)
      if (!r->seen[i]) missing.push_back(user + "/" + items[i]);
  }
  return missing;
}

std::vector<TestEvent> MakeEvents(const std::string& tag, int users, int per_user, int days,
                                  int64_t now_ms, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> age(0, std::max<int64_t>(int64_t{days} * 86400000 - 1, 0));
  std::uniform_int_distribution<int> list(1, 5);
  std::vector<TestEvent> out;
  int n = 0;
  for (int u = 0; u < users; ++u) {
    for (int e = 0; e < per_user; ++e) {
      TestEvent ev;
      ev.user = tag + "-u" + std::to_string(u);
      int count = (e % 4 == 0) ? list(rng) : 1;
      for (int i = 0; i < count; ++i) ev.items.push_back(tag + "-i" + std::to_string(n++));
      ev.ts_ms = now_ms - age(rng);
      out.push_back(std::move(ev));
    }
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

std::unique_ptr<Process> StartServe(Stack& stack, const std::string& config, int port,
                                    const std::vector<std::string>& sets, const std::string& log) {
  std::vector<std::string> argv = {
      EF_BINARY, "serve", "-c", config, "--set", "serve.listen=127.0.0.1:" + std::to_string(port)};
  for (const auto& s : sets) {
    argv.push_back("--set");
    argv.push_back(s);
  }
  auto p = std::make_unique<Process>(argv, stack.dir().File(log));
  const bool up = WaitFor(
      [&] {
        if (!p->Running()) return true;
        httplib::Client c("127.0.0.1", port);
        auto r = c.Get("/healthz");
        return r && r->status == 200;
      },
      std::chrono::seconds(30));
  INFO("serve output:\n" << p->Output());
  REQUIRE(up);
  REQUIRE(p->Running());
  return p;
}

}  // namespace ef::test
