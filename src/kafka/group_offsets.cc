#include "kafka/group_offsets.h"

#include <algorithm>

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"

namespace ef {

int64_t PartitionOffsets::LagMessages() const {
  if (high < 0) return 0;
  int64_t from = std::max(committed, low);
  return std::max<int64_t>(0, high - std::max<int64_t>(from, 0));
}

int64_t PartitionOffsets::LostMessages() const {
  return committed >= 0 && low > committed ? low - committed : 0;
}

StatusOr<std::vector<PartitionOffsets>> ReadGroupOffsets(const KafkaConfig& config,
                                                         int timeout_ms) {
  auto handle = kafka::NewConsumerHandle(config);
  if (!handle.ok()) return handle.status();
  kafka::HandlePtr rk = std::move(handle.value());

  std::vector<PartitionOffsets> out;
  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(16));
  for (const auto& topic : config.topics) {
    rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk.get(), topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk.get(), 0, rkt, &md, timeout_ms);
    rd_kafka_topic_destroy(rkt);
    if (e)
      return kafka::FromKafkaError(e,
                                   "kafka " + config.bootstrap_servers + ": metadata for " + topic);
    Status st;
    const rd_kafka_resp_err_t topic_err =
        md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
    if (kafka::IsUnknownTopic(topic_err)) {
      // Refused for good, as `run` says after a while (docs/CLI.md exit code 3).
      st = PermissionDenied("kafka: topic " + topic + ": " + rd_kafka_err2str(topic_err) +
                            " (check kafka.topic and the broker's topics)");
    } else if (topic_err) {
      st = kafka::FromKafkaError(topic_err, "kafka: topic " + topic);
    } else {
      for (int p = 0; p < md->topics[0].partition_cnt; ++p) {
        int32_t id = md->topics[0].partitions[p].id;
        out.push_back({{topic, id}});
        rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), id);
      }
    }
    rd_kafka_metadata_destroy(md);
    EF_RETURN_IF_ERROR(st);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.tp < b.tp; });
  rd_kafka_resp_err_t e = rd_kafka_committed(rk.get(), list.get(), timeout_ms);
  if (e) return kafka::FromKafkaError(e, "kafka: committed offsets of group " + config.group_id);
  for (int i = 0; i < list->cnt; ++i) {
    for (auto& po : out) {
      if (po.tp.topic == list->elems[i].topic && po.tp.partition == list->elems[i].partition) {
        po.committed = list->elems[i].offset >= 0 ? list->elems[i].offset : -1;
        if (list->elems[i].metadata)
          po.metadata.assign(static_cast<const char*>(list->elems[i].metadata),
                             list->elems[i].metadata_size);
      }
    }
  }
  for (auto& po : out) {
    e = rd_kafka_query_watermark_offsets(rk.get(), po.tp.topic.c_str(), po.tp.partition, &po.low,
                                         &po.high, timeout_ms);
    if (e)
      return kafka::FromKafkaError(
          e, "kafka: watermarks of " + po.tp.topic + "/" + std::to_string(po.tp.partition));
  }
  return out;
}

}  // namespace ef
