// EventGenerator: synthetic exposure events for loadgen, tests and benchmarks.
// Users and items are Zipf-distributed ranks ("u<rank>", "i<rank>", or bare
// integers); event times are now, or spread uniformly over the last `spread_ms`.
// Deterministic for a given seed. Not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "loadgen/zipf.h"

namespace ef {

struct GeneratorOptions {
  uint64_t users = 1000000;
  uint64_t items = 10000000;
  double zipf_s = 1.0;            // exponent for users and items
  int list_size = 1;              // items per list-form event
  double list_fraction = 0.0;     // share of events in list form
  double bad_fraction = 0.0;      // share of malformed events (for demos of rejects)
  int64_t spread_ms = 0;          // event times uniform in [now - spread, now]
  bool integer_ids = false;       // 42 instead of "u42"
  uint64_t seed = 1;
};

struct GeneratedEvent {
  std::string user;     // also the Kafka message key (keeps a user on one partition)
  std::string payload;  // JSON
  int64_t ts_ms = 0;
  bool bad = false;
};

class EventGenerator {
 public:
  explicit EventGenerator(GeneratorOptions options);
  // Fills *out (reusing its storage).
  void Next(int64_t now_ms, GeneratedEvent* out);

 private:
  void AppendId(char prefix, uint64_t rank, std::string* out);
  GeneratorOptions o_;
  std::mt19937_64 rng_;
  ZipfSampler users_;
  ZipfSampler items_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  uint64_t counter_ = 0;
};

}  // namespace ef
