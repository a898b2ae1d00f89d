// Decoder::Decode throughput on realistic payloads. Items/s counts item IDs (one per
// single-form event); the events/s counter counts payloads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"

namespace ef {
namespace {

constexpr int64_t kNowMs = 1763856000500;
constexpr int64_t kTsMs = 1763800000123;
constexpr size_t kPayloads = 4096;  // varied IDs, so branches and lengths are not one pattern

std::string RandomId(std::mt19937_64& rng, char prefix) {
  return prefix + std::to_string(1000000 + rng() % 900000000);
}

// ≈ 70 bytes: {"user_id":"u123456789","item_id":"i987654321","ts":1763800000123}
std::vector<std::string> SinglePayloads() {
  std::mt19937_64 rng(1);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"user_id":")" + RandomId(rng, 'u') + R"(","item_id":")" + RandomId(rng, 'i') +
                  R"(","ts":)" + std::to_string(kTsMs + i) + "}");
  }
  return out;
}

std::vector<std::string> SingleIntegerPayloads() {
  std::mt19937_64 rng(2);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"user_id":)" + std::to_string(rng() % 100000000) + R"(,"item_id":)" +
                  std::to_string(rng() % 10000000000) + R"(,"ts":)" + std::to_string(kTsMs + i) +
                  "}");
  }
  return out;
}

// What producers often send: the exposure plus context the decoder skips.
std::vector<std::string> SingleWithContextPayloads() {
  std::mt19937_64 rng(3);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"event":"exposure","user_id":")" + RandomId(rng, 'u') + R"(","item_id":")" +
                  RandomId(rng, 'i') + R"(","ts":)" + std::to_string(kTsMs + i) +
                  R"(,"page":"home","pos":)" + std::to_string(rng() % 50) +
                  R"(,"app":{"os":"android","ver":"8.12.0"},"ab":["feed_v2","rank_b"]})");
  }
  return out;
}

std::vector<std::string> ListPayloads(int items) {
  std::mt19937_64 rng(4);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads / 4; ++i) {
    std::string s = R"({"user_id":")" + RandomId(rng, 'u') + R"(","items":[)";
    for (int k = 0; k < items; ++k) {
      if (k > 0) s += ',';
      s += '"' + RandomId(rng, 'i') + '"';
    }
    s += R"(],"ts":)" + std::to_string(kTsMs + i) + "}";
    out.push_back(std::move(s));
  }
  return out;
}

void Run(benchmark::State& state, const std::vector<std::string>& payloads,
         int64_t items_per_event) {
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder(events, filter);
  Event event;
  size_t i = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    const std::string& p = payloads[i];
    if (++i == payloads.size()) i = 0;
    const RejectReason r = decoder.Decode(p.data(), p.size(), 0, kNowMs, &event);
    if (r != RejectReason::kNone) {
      state.SkipWithError(RejectReasonName(r));
      break;
    }
    benchmark::DoNotOptimize(event.items.data());
    bytes += static_cast<int64_t>(p.size());
  }
  state.SetItemsProcessed(state.iterations() * items_per_event);
  state.SetBytesProcessed(bytes);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  size_t total = 0;
  for (const std::string& p : payloads) total += p.size();
  state.counters["avg_bytes"] = static_cast<double>(total) / static_cast<double>(payloads.size());
}

void BM_DecodeSingle(benchmark::State& state) {
  static const std::vector<std::string> payloads = SinglePayloads();
  Run(state, payloads, 1);
}
BENCHMARK(BM_DecodeSingle);

void BM_DecodeSingleIntegerIds(benchmark::State& state) {
  static const std::vector<std::string> payloads = SingleIntegerPayloads();
  Run(state, payloads, 1);
}
BENCHMARK(BM_DecodeSingleIntegerIds);

void BM_DecodeSingleWithContext(benchmark::State& state) {
  static const std::vector<std::string> payloads = SingleWithContextPayloads();
  Run(state, payloads, 1);
}
BENCHMARK(BM_DecodeSingleWithContext);

void BM_DecodeList20(benchmark::State& state) {
  static const std::vector<std::string> payloads = ListPayloads(20);
  Run(state, payloads, 20);
}
BENCHMARK(BM_DecodeList20);

// The reject path must be cheap too: a flood of bad events must not stall a partition.
void BM_DecodeRejectNotJson(benchmark::State& state) {
  EventsConfig events;
  FilterConfig filter;
  Decoder decoder(events, filter);
  Event event;
  const std::string payload = R"({"user_id":"u123456789","item_id":"i987654321","ts":17638)";
  for (auto _ : state) {
    benchmark::DoNotOptimize(decoder.Decode(payload.data(), payload.size(), 0, kNowMs, &event));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_DecodeRejectNotJson);

}  // namespace
}  // namespace ef
