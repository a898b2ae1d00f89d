// `serve`'s JSON work per request (serve/request.h), as scripts/bench-read.sh
// sends it: a body of 1,000 string candidates parsed, and the answer built with
// 70% of them unseen (echoed back) and 30% seen.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "serve/request.h"

namespace {

// clusters: also a "clusters" array as bench-read's --near-duplicates sends it (1
// candidate in 5 in one of 1,000 shared clusters, the others their own).
std::string Body(size_t n, bool clusters = false) {
  std::mt19937_64 rng(5);
  std::string body = "{\"user_id\":\"u12345\",\"items\":[";
  std::string cl = ",\"clusters\":[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) body += ',', cl += ',';
    const std::string item = "\"item-" + std::to_string(rng() % 100000000) + "\"";
    body += item;
    cl += rng() % 5 == 0 ? "\"story-" + std::to_string(rng() % 1000) + "\"" : item;
  }
  return body + "]" + (clusters ? cl + "]" : "") + "}";
}

void Parse(benchmark::State& state, bool clusters) {
  const std::string body = Body(1000, clusters);
  ef::serve::RequestParser parser;
  ef::serve::ParsedQuery q;
  ef::serve::ParseError err;
  for (auto _ : state) {
    if (!parser.ParseFilter(body, ef::serve::Limits{}, &q, &err)) state.SkipWithError("parse");
    benchmark::DoNotOptimize(q.items.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(q.items.size()));
}

void BM_ServeParseFilter(benchmark::State& state) { Parse(state, false); }
void BM_ServeParseFilterClusters(benchmark::State& state) { Parse(state, true); }

void BM_ServeFilterResponse(benchmark::State& state) {
  ef::serve::RequestParser parser;
  ef::serve::ParsedQuery q;
  ef::serve::ParseError err;
  (void)parser.ParseFilter(Body(1000), ef::serve::Limits{}, &q, &err);
  std::vector<bool> seen(q.items.size());
  std::mt19937_64 rng(6);
  for (size_t i = 0; i < seen.size(); ++i) seen[i] = rng() % 10 < 3;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = ef::serve::FilterResponse(q, ef::serve::Answer{&seen, false});
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(q.items.size()));
}

// The same with a served ring (issue 30): 5% of the candidates served before,
// listed apart, and a mark of 50 ("marked").
void BM_ServeFilterResponseServed(benchmark::State& state) {
  ef::serve::RequestParser parser;
  ef::serve::ParsedQuery q;
  ef::serve::ParseError err;
  (void)parser.ParseFilter(Body(1000), ef::serve::Limits{}, &q, &err);
  std::vector<bool> seen(q.items.size()), served(q.items.size());
  std::mt19937_64 rng(6);
  size_t served_count = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    const auto r = rng() % 100;
    seen[i] = r < 30;
    served[i] = r >= 30 && r < 35;
    served_count += served[i];
  }
  ef::serve::Answer answer{&seen, false, &served, served_count};
  answer.marking = true;
  answer.marked = 50;
  size_t bytes = 0;
  for (auto _ : state) {
    std::string out = ef::serve::FilterResponse(q, answer);
    bytes = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(q.items.size()));
}

}  // namespace

BENCHMARK(BM_ServeParseFilter)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ServeParseFilterClusters)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ServeFilterResponse)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ServeFilterResponseServed)->Unit(benchmark::kMicrosecond);
