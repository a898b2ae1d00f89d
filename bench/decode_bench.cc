// Decoder::Decode throughput on realistic payloads. Items/s counts item IDs (one per
// single-form event); the events/s counter counts payloads.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "event/decoder.h"
#include "event/event.h"
#include "payloads.h"

namespace ef {
namespace {

using bench::kNowMs;
using bench::ListPayloads;
using bench::SingleIntegerPayloads;
using bench::SinglePayloads;
using bench::SingleWithContextPayloads;

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
