#include "support/kafka_reader.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

namespace ef::test {
namespace {

struct Deleter {
  void operator()(rd_kafka_t* rk) const {
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
  }
  void operator()(rd_kafka_conf_t* c) const { rd_kafka_conf_destroy(c); }
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};

void Set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char err[512];
  if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK)
    throw std::runtime_error(std::string("kafka reader: ") + name + ": " + err);
}

int Millis(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(left.count(), 0));
}

}  // namespace

std::optional<std::string> KafkaRecord::Header(const std::string& name) const {
  for (const auto& [n, v] : headers)
    if (n == name) return v;
  return std::nullopt;
}

std::vector<KafkaRecord> ReadTopic(const std::string& bootstrap_servers, const std::string& topic,
                                   std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<rd_kafka_conf_t, Deleter> conf(rd_kafka_conf_new());
  Set(conf.get(), "bootstrap.servers", bootstrap_servers);
  Set(conf.get(), "group.id", "ef-test-reader");  // never joined: partitions are assigned
  Set(conf.get(), "enable.auto.commit", "false");
  Set(conf.get(), "enable.auto.offset.store", "false");
  Set(conf.get(), "enable.partition.eof", "true");
  Set(conf.get(), "fetch.wait.max.ms", "10");
  Set(conf.get(), "log_level", "3");
  char err[512];
  std::unique_ptr<rd_kafka_t, Deleter> rk(
      rd_kafka_new(RD_KAFKA_CONSUMER, conf.get(), err, sizeof err));
  if (!rk) throw std::runtime_error(std::string("kafka reader: ") + err);
  conf.release();  // owned by rk now
  rd_kafka_poll_set_consumer(rk.get());

  // Partitions and their high watermarks as of now.
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t e = rd_kafka_metadata(rk.get(), 0, rkt, &md, Millis(deadline));
  rd_kafka_topic_destroy(rkt);
  if (e)
    throw std::runtime_error("kafka reader: metadata of " + topic + ": " + rd_kafka_err2str(e));
  std::vector<int32_t> partitions;
  const bool found = md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR;
  const std::string why = md->topic_cnt == 1 ? rd_kafka_err2str(md->topics[0].err) : "missing";
  if (found)
    for (int i = 0; i < md->topics[0].partition_cnt; ++i)
      partitions.push_back(md->topics[0].partitions[i].id);
  rd_kafka_metadata_destroy(md);
  if (!found || partitions.empty())
    throw std::runtime_error("kafka reader: topic " + topic + ": " + why);

  std::map<int32_t, int64_t> high;  // partitions still to read -> high watermark
  std::unique_ptr<rd_kafka_topic_partition_list_t, Deleter> list(
      rd_kafka_topic_partition_list_new(static_cast<int>(partitions.size())));
  for (int32_t p : partitions) {
    int64_t lo = 0, hi = 0;
    e = rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &lo, &hi, Millis(deadline));
    if (e)
      throw std::runtime_error("kafka reader: watermarks of " + topic + "/" + std::to_string(p) +
                               ": " + rd_kafka_err2str(e));
    if (hi > lo) {
      high[p] = hi;
      rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
  }
  const std::map<int32_t, int64_t> limit_by_partition = high;
  auto limit = [&](int32_t p) {
    auto it = limit_by_partition.find(p);
    return it == limit_by_partition.end() ? int64_t{0} : it->second;
  };
  std::vector<KafkaRecord> out;
  if (high.empty()) return out;
  e = rd_kafka_assign(rk.get(), list.get());
  if (e) throw std::runtime_error("kafka reader: assign: " + std::string(rd_kafka_err2str(e)));

  while (!high.empty()) {
    if (Millis(deadline) == 0)
      throw std::runtime_error("kafka reader: " + topic + ": timed out with " +
                               std::to_string(high.size()) + " partition(s) not read to the end");
    std::unique_ptr<rd_kafka_message_t, Deleter> m(
        rd_kafka_consumer_poll(rk.get(), std::min(Millis(deadline), 100)));
    if (!m) continue;
    const int32_t p = m->partition;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (high.count(p) && m->offset >= high[p]) high.erase(p);
      continue;
    }
    if (m->err)
      throw std::runtime_error("kafka reader: " + topic + ": " + rd_kafka_message_errstr(m.get()));
    KafkaRecord r;
    r.topic = topic;
    r.partition = p;
    r.offset = m->offset;
    if (m->key) r.key.assign(static_cast<const char*>(m->key), m->key_len);
    if (m->payload) r.payload.assign(static_cast<const char*>(m->payload), m->len);
    r.timestamp_ms = rd_kafka_message_timestamp(m.get(), nullptr);
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(m.get(), &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* name = nullptr;
      const void* value = nullptr;
      size_t size = 0;
      for (size_t i = 0;
           rd_kafka_header_get_all(hdrs, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++i)
        r.headers.emplace_back(
            name, value ? std::string(static_cast<const char*>(value), size) : std::string());
    }
    if (r.offset + 1 >= limit(p)) high.erase(p);
    if (r.offset < limit(p)) out.push_back(std::move(r));  // not what came after the call
  }
  std::sort(out.begin(), out.end(), [](const KafkaRecord& a, const KafkaRecord& b) {
    return a.partition != b.partition ? a.partition < b.partition : a.offset < b.offset;
  });
  return out;
}

}  // namespace ef::test
