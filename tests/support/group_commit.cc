#include "support/group_commit.h"

#include <librdkafka/rdkafka.h>

#include <catch2/catch.hpp>

namespace ef::test {

void Commit(Stack& stack, const std::string& group, const std::map<int, int64_t>& offsets) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::string servers = stack.kafka().bootstrap_servers();
  REQUIRE(rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof err) ==
          RD_KAFKA_CONF_OK);
  REQUIRE(rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk != nullptr);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(4);
  for (const auto& [partition, offset] : offsets)
    rd_kafka_topic_partition_list_add(list, stack.topic().c_str(), partition)->offset = offset;
  // Synchronous: the offsets are stored when it returns.
  const rd_kafka_resp_err_t e = rd_kafka_commit(rk, list, 0);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);  // never subscribed
  INFO("commit for group " << group << ": " << rd_kafka_err2str(e));
  REQUIRE(e == RD_KAFKA_RESP_ERR_NO_ERROR);
}

}  // namespace ef::test
