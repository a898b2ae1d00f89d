// Produces events in one Kafka transaction with librdkafka's transactional
// producer, so every partition written ends in a transaction control record
// (the commit marker): its high watermark is one past the last event.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "support/stack.h"

namespace ef::test {

// Events keyed by user, values TestEvent::Json(); commits the transaction and
// waits for it (at most 30 s).
Status ProduceTransaction(const std::string& bootstrap_servers, const std::string& topic,
                          const std::vector<TestEvent>& events);

}  // namespace ef::test
