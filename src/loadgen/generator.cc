#include "loadgen/generator.h"

#include <charconv>

namespace ef {

EventGenerator::EventGenerator(GeneratorOptions options)
    : o_(options), rng_(options.seed), users_(options.users, options.zipf_s),
      items_(options.items, options.zipf_s) {}

void EventGenerator::AppendId(char prefix, uint64_t rank, std::string* out) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, rank);
  if (o_.integer_ids) {
    out->append(buf, p);
  } else {
    out->push_back('"');
    out->push_back(prefix);
    out->append(buf, p);
    out->push_back('"');
  }
}

void EventGenerator::Next(int64_t now_ms, GeneratedEvent* out) {
  ++counter_;
  out->payload.clear();
  out->bad = o_.bad_fraction > 0 && unit_(rng_) < o_.bad_fraction;
  const uint64_t user = users_.Sample(rng_);
  out->user = "u" + std::to_string(user);
  out->ts_ms = now_ms;
  if (o_.spread_ms > 0) out->ts_ms -= static_cast<int64_t>(unit_(rng_) * static_cast<double>(o_.spread_ms));
  if (out->bad) {
    // A few kinds of damage, in turn: truncated JSON, no user, empty item.
    switch (counter_ % 3) {
      case 0: out->payload = "{\"user_id\": \"" + out->user + "\", \"item_id\": "; break;
      case 1: out->payload = "{\"item_id\": \"i1\", \"ts\": " + std::to_string(out->ts_ms) + "}"; break;
      default: out->payload = "{\"user_id\": \"" + out->user + "\", \"item_id\": \"\"}"; break;
    }
    return;
  }
  std::string& s = out->payload;
  s.append("{\"user_id\":");
  AppendId('u', user, &s);
  const bool list = o_.list_fraction > 0 && unit_(rng_) < o_.list_fraction;
  if (list) {
    s.append(",\"items\":[");
    for (int i = 0; i < o_.list_size; ++i) {
      if (i) s.push_back(',');
      AppendId('i', items_.Sample(rng_), &s);
    }
    s.push_back(']');
  } else {
    s.append(",\"item_id\":");
    AppendId('i', items_.Sample(rng_), &s);
  }
  s.append(",\"ts\":");
  s.append(std::to_string(out->ts_ms));
  s.push_back('}');
}

}  // namespace ef
