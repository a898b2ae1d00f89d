// Precision and recall of the content fingerprint on the fortunes corpus
// (tests/content/corpus.h, measure.h): prints the tables of docs/CONTENT.md
// "Precision and recall". scripts/bench.sh --content runs it.
//   ef_content_corpus [--dir DIR] [--false-matches N]
//     --dir DIR            the fortune files (default /usr/share/games/fortunes)
//     --false-matches N    instead: N pairs of different stories within distance
//                          3 (false matches), shortest first
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "content/corpus.h"
#include "content/measure.h"

int main(int argc, char** argv) {
  namespace c = ef::content::corpus;
  c::Options opt;
  size_t false_matches = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      opt.dir = argv[++i];
    } else if (std::strcmp(argv[i], "--false-matches") == 0 && i + 1 < argc) {
      false_matches = std::strtoul(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR] [--false-matches N]\n", argv[0]);
      return 2;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  c::Corpus corpus;
  if (ef::Status st = c::Build(opt, &corpus); !st.ok()) {
    std::fprintf(stderr, "content corpus: %s\n", st.message().c_str());
    return 1;
  }
  if (false_matches > 0) {
    std::vector<c::FalseMatch> pairs;
    if (ef::Status st = c::FalseMatches(corpus, false_matches, &pairs); !st.ok()) {
      std::fprintf(stderr, "content corpus: %s\n", st.message().c_str());
      return 1;
    }
    for (const c::FalseMatch& p : pairs)
      std::printf("--- distance %d, %u tokens, %s\n%s\n-- vs\n%s\n", p.distance, p.tokens,
                  c::LangName(p.a->lang), p.a->text.c_str(), p.b->text.c_str());
    return 0;
  }
  c::Measurement m;
  if (ef::Status st = c::Measure(corpus, &m); !st.ok()) {
    std::fprintf(stderr, "content corpus: %s\n", st.message().c_str());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Corpus: %zu originals, %zu variants, %zu unrelated texts; digest %016llx; %.1f s\n",
              corpus.originals.size(), corpus.variants.size(), corpus.unrelated.size(),
              static_cast<unsigned long long>(c::Digest(corpus)), secs);
  for (int lang = 0; lang < 2; ++lang)
    std::printf("%s: %zu texts, %llu tokens, %.2f characters per token\n",
                c::LangName(static_cast<c::Lang>(lang)), m.texts[lang],
                static_cast<unsigned long long>(m.tokens[lang]),
                static_cast<double>(m.chars[lang]) / static_cast<double>(m.tokens[lang]));
  std::printf("\n");
  std::fputs(c::Report(m).c_str(), stdout);
  return 0;
}
