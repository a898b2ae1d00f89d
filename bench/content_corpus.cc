// Precision and recall of the content fingerprint on the fortunes corpus
// (tests/content/corpus.h, measure.h): prints the tables of docs/CONTENT.md
// "Precision and recall". scripts/bench.sh --content runs it.
//   ef_content_corpus [--dir DIR]   (default /usr/share/games/fortunes)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "content/corpus.h"
#include "content/measure.h"

int main(int argc, char** argv) {
  namespace c = ef::content::corpus;
  c::Options opt;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      opt.dir = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--dir DIR]\n", argv[0]);
      return 2;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  c::Corpus corpus;
  if (ef::Status st = c::Build(opt, &corpus); !st.ok()) {
    std::fprintf(stderr, "content corpus: %s\n", st.message().c_str());
    return 1;
  }
  c::Measurement m;
  if (ef::Status st = c::Measure(corpus, &m); !st.ok()) {
    std::fprintf(stderr, "content corpus: %s\n", st.message().c_str());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Corpus: %zu originals, %zu variants, %zu unrelated texts; digest %016llx; "
              "English %zu texts (%llu tokens), Chinese %zu texts (%llu tokens); %.1f s\n\n",
              corpus.originals.size(), corpus.variants.size(), corpus.unrelated.size(),
              static_cast<unsigned long long>(c::Digest(corpus)), m.texts[0],
              static_cast<unsigned long long>(m.tokens[0]), m.texts[1],
              static_cast<unsigned long long>(m.tokens[1]), secs);
  std::fputs(c::Report(m).c_str(), stdout);
  return 0;
}
