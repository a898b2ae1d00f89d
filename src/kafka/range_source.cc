#include "kafka/range_source.h"

#include "kafka/consumer_handle.h"
#include "kafka/handles.h"
#include "kafka/log.h"

namespace ef {

struct RangeSource::Impl {
  kafka::HandlePtr rk;
  std::vector<kafka::MessagePtr> held;
  std::vector<int64_t> next;  // per range
  kafka::TopicNames topics;
  bool paused = false;
};

StatusOr<std::unique_ptr<RangeSource>> RangeSource::Create(const KafkaConfig& config,
                                                           std::vector<OffsetRange> ranges) {
  // librdkafka's consumer API needs a group id even for assign(); a replay never
  // joins it (no subscribe) and never commits, whatever the user's properties say.
  auto handle = kafka::NewConsumerHandle(config, {{"group.id", config.group_id + "-replay"},
                                                  {"enable.auto.commit", "false"},
                                                  {"queued.min.messages", "100000"},
                                                  // The end-of-partition event says where
                                                  // the log ends, past transaction markers
                                                  // and compaction gaps.
                                                  {"enable.partition.eof", "true"}});
  if (!handle.ok()) return handle.status().Prefixed("replay");
  rd_kafka_t* rk = handle->get();
  rd_kafka_poll_set_consumer(rk);
  std::unique_ptr<RangeSource> s(new RangeSource());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->rk = std::move(handle.value());
  s->ranges_ = std::move(ranges);
  kafka::PartitionListPtr list(
      rd_kafka_topic_partition_list_new(static_cast<int>(s->ranges_.size())));
  for (const auto& r : s->ranges_) {
    s->impl_->next.push_back(r.start);
    if (r.start >= r.end) continue;
    rd_kafka_topic_partition_list_add(list.get(), r.tp.topic.c_str(), r.tp.partition)->offset =
        r.start;
  }
  rd_kafka_resp_err_t e = rd_kafka_assign(rk, list.get());
  if (e) return kafka::FromKafkaError(e, "kafka: assign replay partitions");
  return s;
}

RangeSource::~RangeSource() { Close(); }

bool RangeSource::Done() const {
  for (size_t i = 0; i < ranges_.size(); ++i)
    if (impl_->next[i] < ranges_[i].end) return false;
  return true;
}

std::vector<int64_t> RangeSource::Positions() const { return impl_->next; }

size_t RangeSource::RangeOf(const char* topic, int32_t partition) const {
  size_t i = 0;
  while (i < ranges_.size() &&
         !(ranges_[i].tp.partition == partition && ranges_[i].tp.topic == topic))
    ++i;
  return i;
}

int64_t RangeSource::Position(const TopicPartition& tp) {
  const size_t i = RangeOf(tp.topic.c_str(), tp.partition);
  return i < ranges_.size() ? impl_->next[i] : -1;
}

Status RangeSource::Poll(size_t max_messages, int timeout_ms, int, std::vector<Message>* out) {
  out->clear();
  impl_->held.clear();
  int wait = timeout_ms;
  while (out->size() < max_messages && !Done()) {
    rd_kafka_message_t* raw = rd_kafka_consumer_poll(impl_->rk.get(), wait);
    if (!raw) break;
    wait = 0;
    kafka::MessagePtr msg(raw);
    if (msg->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // Nothing more to read up to msg->offset: a range ending there is done
      // even if its last offsets hold no record (marker, compacted away).
      const size_t i = RangeOf(rd_kafka_topic_name(msg->rkt), msg->partition);
      if (i < ranges_.size() && msg->offset >= ranges_[i].end) impl_->next[i] = ranges_[i].end;
      continue;
    }
    if (msg->err) {
      if (msg->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE)
        return InvalidArgument(std::string("kafka: replay range no longer in the topic: ") +
                               rd_kafka_message_errstr(msg.get()));
      kafka::LogThrottled(msg->err,
                          std::string("kafka: replay: ") + rd_kafka_message_errstr(msg.get()));
      continue;
    }
    const char* topic = rd_kafka_topic_name(msg->rkt);
    const size_t i = RangeOf(topic, msg->partition);
    if (i == ranges_.size()) continue;
    if (msg->offset >= ranges_[i].end) {  // past the range: everything before it was read
      impl_->next[i] = ranges_[i].end;
      continue;
    }
    impl_->next[i] = msg->offset + 1;
    out->push_back(kafka::ToMessage(*msg, impl_->topics.Intern(topic)));
    impl_->held.push_back(std::move(msg));
  }
  return Status::Ok();
}

Status RangeSource::PauseAll() {
  impl_->paused = true;
  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(ranges_.size())));
  for (const auto& r : ranges_)
    rd_kafka_topic_partition_list_add(list.get(), r.tp.topic.c_str(), r.tp.partition);
  return kafka::FromKafkaError(rd_kafka_pause_partitions(impl_->rk.get(), list.get()),
                               "kafka: pause");
}

Status RangeSource::ResumeAll() {
  impl_->paused = false;
  kafka::PartitionListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(ranges_.size())));
  for (const auto& r : ranges_)
    rd_kafka_topic_partition_list_add(list.get(), r.tp.topic.c_str(), r.tp.partition);
  return kafka::FromKafkaError(rd_kafka_resume_partitions(impl_->rk.get(), list.get()),
                               "kafka: resume");
}

std::vector<TopicPartition> RangeSource::Assignment() {
  std::vector<TopicPartition> out;
  for (const auto& r : ranges_) out.push_back(r.tp);
  return out;
}

void RangeSource::Close() {
  if (!impl_ || !impl_->rk) return;
  impl_->held.clear();
  rd_kafka_assign(impl_->rk.get(), nullptr);
  impl_->rk.reset();
}

}  // namespace ef
