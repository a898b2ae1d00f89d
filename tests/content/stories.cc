#include "content/stories.h"

#include <catch2/catch.hpp>
#include <vector>

#include "content/corpus.h"
#include "content/simhash.h"
#include "content/tokenizer.h"

namespace ef::content::stories {

using corpus::ApplyEdit;
using corpus::Edit;
using corpus::Lang;

uint64_t Fingerprint(const std::string& text, uint32_t* tokens) {
  content::Tokenizer tokenizer;
  std::vector<content::WeightedToken> wt;
  REQUIRE(tokenizer.Tokenize(text, &wt).ok());
  uint32_t n = 0;
  for (const auto& t : wt) n += t.weight;
  if (tokens) *tokens = n;
  return content::Simhash(wt, 0);
}

Texts MakeTexts() {
  std::vector<std::string> entries;
  REQUIRE(content::corpus::ReadFortunes("/usr/share/games/fortunes/fortunes", &entries).ok());
  REQUIRE(entries.size() > 100);
  for (size_t start = 0; start + 45 < entries.size(); start += 7) {
    Texts t;
    uint32_t tokens = 0;
    size_t i = start;
    while (tokens < 256 && i < start + 40) {
      t.original += (t.original.empty() ? "" : "\n\n") + entries[i++];
      Fingerprint(t.original, &tokens);
    }
    if (tokens < 256) continue;
    const uint64_t fp = Fingerprint(t.original);
    for (Edit edit : {Edit::kInsert, Edit::kRemove, Edit::kHeadline}) {
      for (uint64_t r = 1; r <= 5; ++r) {
        t.repost = ApplyEdit(edit, Lang::kEnglish, t.original, entries[i], r);
        if (t.repost.empty()) continue;
        const int d = content::HammingDistance(fp, Fingerprint(t.repost));
        if (d < 1 || d > 3) continue;
        t.unrelated = entries[i + 3];
        if (content::HammingDistance(fp, Fingerprint(t.unrelated)) <= 8) continue;
        if (content::HammingDistance(Fingerprint(t.repost), Fingerprint(t.unrelated)) <= 8)
          continue;
        return t;
      }
    }
  }
  FAIL("no original with a near re-post in the fortunes file");
  return {};
}

}  // namespace ef::content::stories
