// ReplyScanner (redis/reply_scanner.h): the write pipeline's reply reader. One
// iteration = the replies of one default batch (20,000 keys, bitfield mode): a
// BITFIELD reply per key (an array of 1 + 12 integers: the sentinel GET and
// k = 12 SETs, old bits mostly 1) and an EXPIREAT reply for one key in three,
// fed in 256 KiB chunks as the connection receives them, every reply scanned.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <string_view>

#include "redis/reply_scanner.h"

namespace ef {
namespace {

constexpr size_t kKeys = 20000;
constexpr size_t kChunk = 256 * 1024;

std::string BatchReplies(size_t* replies) {
  std::mt19937 rng(11);
  std::string s;
  *replies = 0;
  for (size_t i = 0; i < kKeys; ++i) {
    s += "*13\r\n";
    for (int j = 0; j < 13; ++j) s += (rng() % 4 == 0) ? ":0\r\n" : ":1\r\n";
    ++*replies;
    if (i % 3 == 0) {
      s += ":1\r\n";
      ++*replies;
    }
  }
  return s;
}

void BM_ReplyScanner_BitfieldBatch(benchmark::State& state) {
  size_t expected = 0;
  const std::string stream = BatchReplies(&expected);
  ReplyScanner scanner;
  size_t zeros = 0;
  for (auto _ : state) {
    size_t replies = 0;
    for (size_t at = 0; at < stream.size(); at += kChunk) {
      const size_t n = std::min(kChunk, stream.size() - at);
      std::memcpy(scanner.PrepareWrite(n), stream.data() + at, n);
      scanner.Commit(n);
      for (;;) {
        std::string_view text;
        ReplyScanner::Ints ints;
        if (scanner.Next(&text, &ints) != ReplyScanner::Result::kReply) break;
        zeros += ints.zeros;
        ++replies;
      }
    }
    if (replies != expected) state.SkipWithError("reply count mismatch");
    benchmark::DoNotOptimize(zeros);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kKeys));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_ReplyScanner_BitfieldBatch)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ef
