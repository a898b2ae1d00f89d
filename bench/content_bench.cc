// Content fingerprint throughput (docs/CONTENT.md, docs/PERFORMANCE.md) on real
// text: the originals of the fortunes corpus (tests/content/corpus.h: single
// fortunes and stories of 3..6, from the Debian packages fortunes and
// fortunes-zh), one text per iteration, cycling. bytes_per_second counts the
// UTF-8 bytes of the texts on one thread (MB/s per core):
//   BM_ContentFingerprint/<lang>: Tokenizer::Tokenize + Simhash (text -> fingerprint);
//   BM_ContentSimhashTokens/<lang>: Simhash alone, from tokens already weighted
//   (the `tokens` input of a caller that tokenizes itself).
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "content/corpus.h"
#include "content/simhash.h"
#include "content/tokenizer.h"

namespace ef::content {
namespace {

struct Texts {
  std::vector<std::string> text[2];
  std::vector<std::vector<WeightedToken>> tokens[2];
};

const Texts& Get() {
  static const Texts* t = [] {
    auto* t = new Texts;
    corpus::Corpus c;
    if (Status st = corpus::Build(corpus::Options{}, &c); !st.ok()) return t;
    Tokenizer tokenizer;
    for (const corpus::Text& o : c.originals) {
      const int lang = static_cast<int>(o.lang);
      t->text[lang].push_back(o.text);
      t->tokens[lang].emplace_back();
      (void)tokenizer.Tokenize(o.text, &t->tokens[lang].back());
    }
    return t;
  }();
  return *t;
}

void BM_ContentFingerprint(benchmark::State& state) {
  const std::vector<std::string>& texts = Get().text[state.range(0)];
  if (texts.empty()) return state.SkipWithError("no corpus (install fortunes, fortunes-zh)");
  Tokenizer tokenizer;
  std::vector<WeightedToken> tokens;
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    const std::string& text = texts[i];
    if (++i == texts.size()) i = 0;
    (void)tokenizer.Tokenize(text, &tokens);
    benchmark::DoNotOptimize(Simhash(tokens, 0));
    bytes += text.size();
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(state.range(0) == 0 ? "English" : "Chinese");
}
BENCHMARK(BM_ContentFingerprint)->Arg(0)->Arg(1);

void BM_ContentSimhashTokens(benchmark::State& state) {
  const Texts& t = Get();
  const auto& texts = t.text[state.range(0)];
  const auto& tokens = t.tokens[state.range(0)];
  if (texts.empty()) return state.SkipWithError("no corpus (install fortunes, fortunes-zh)");
  size_t i = 0, bytes = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Simhash(tokens[i], 0));
    bytes += texts[i].size();
    if (++i == texts.size()) i = 0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.SetLabel(state.range(0) == 0 ? "English" : "Chinese");
}
BENCHMARK(BM_ContentSimhashTokens)->Arg(0)->Arg(1);

}  // namespace
}  // namespace ef::content
