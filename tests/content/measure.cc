#include "content/measure.h"

#include <algorithm>
#include <cstdio>

#include "content/simhash.h"
#include "content/tokenizer.h"

namespace ef::content::corpus {
namespace {

struct Fp {
  uint64_t fp;
  uint32_t tokens;
  int story;
};

void Count(Counts& c, int distance) {
  ++c.pairs;
  for (int i = 0; i < kKs; ++i)
    if (distance <= kMinK + i) ++c.matched[static_cast<size_t>(i)];
}

void Add(Counts& to, const Counts& from) {
  to.pairs += from.pairs;
  for (int i = 0; i < kKs; ++i)
    to.matched[static_cast<size_t>(i)] += from.matched[static_cast<size_t>(i)];
}

std::string Percent(uint64_t num, uint64_t den) {
  if (den == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f",
                100.0 * static_cast<double>(num) / static_cast<double>(den));
  return buf;
}

}  // namespace

int Bucket(uint32_t tokens) {
  int b = 0;
  for (uint32_t limit = 8; b < kBuckets - 1 && tokens >= limit; limit *= 2) ++b;
  return b;
}

std::string BucketName(int bucket) {
  if (bucket == 0) return "1-7";
  if (bucket == kBuckets - 1) return std::to_string(4u << bucket) + "+";
  return std::to_string(4u << bucket) + "-" + std::to_string((8u << bucket) - 1);
}

Counts Measurement::Positives(int lang, int edit, int bucket_from, int bucket_to) const {
  Counts c;
  for (int e = 0; e < kEditCount; ++e)
    if (edit < 0 || e == edit)
      for (int b = bucket_from; b <= bucket_to; ++b) Add(c, positive[lang][e][b]);
  return c;
}

Counts Measurement::Negatives(int lang, int bucket_from, int bucket_to) const {
  Counts c;
  for (int b = bucket_from; b <= bucket_to; ++b) Add(c, negative[lang][b]);
  return c;
}

Status Measure(const Corpus& corpus, Measurement* out) {
  *out = Measurement{};
  Tokenizer tokenizer;
  std::vector<WeightedToken> tokens;
  std::vector<Fp> fps[2];
  std::vector<Fp> originals;
  auto fingerprint = [&](const Text& t, Fp* fp) -> Status {
    if (Status st = tokenizer.Tokenize(t.text, &tokens); !st.ok()) return st;
    uint32_t n = 0;
    for (const WeightedToken& w : tokens) n += w.weight;
    *fp = Fp{Simhash(tokens, 0), n, t.story};
    const int lang = static_cast<int>(t.lang);
    ++out->texts[lang];
    out->tokens[lang] += n;
    for (unsigned char ch : t.text) out->chars[lang] += (ch & 0xc0) != 0x80;
    return Status::Ok();
  };
  for (const auto* texts : {&corpus.originals, &corpus.unrelated})
    for (const Text& t : *texts) {
      Fp fp;
      if (Status st = fingerprint(t, &fp); !st.ok()) return st;
      if (texts == &corpus.originals) originals.push_back(fp);
      fps[static_cast<int>(t.lang)].push_back(fp);
    }
  for (const Text& v : corpus.variants) {
    Fp fp;
    if (Status st = fingerprint(v, &fp); !st.ok()) return st;
    const Fp& o = originals[static_cast<size_t>(v.story)];
    Count(out->positive[static_cast<int>(v.lang)][static_cast<int>(v.edit)]
                       [Bucket(std::min(fp.tokens, o.tokens))],
          HammingDistance(fp.fp, o.fp));
    fps[static_cast<int>(v.lang)].push_back(fp);
  }
  for (int lang = 0; lang < 2; ++lang) {
    const std::vector<Fp>& f = fps[lang];
    for (size_t i = 0; i < f.size(); ++i)
      for (size_t j = i + 1; j < f.size(); ++j) {
        if (f[i].story >= 0 && f[i].story == f[j].story) continue;
        Count(out->negative[lang][Bucket(std::min(f[i].tokens, f[j].tokens))],
              HammingDistance(f[i].fp, f[j].fp));
      }
  }
  return Status::Ok();
}

Status FalseMatches(const Corpus& corpus, size_t limit, std::vector<FalseMatch>* out) {
  out->clear();
  Tokenizer tokenizer;
  std::vector<WeightedToken> tokens;
  struct Item {
    const Text* t;
    uint64_t fp;
    uint32_t tokens;
  };
  std::vector<Item> items;
  for (const auto* texts : {&corpus.originals, &corpus.variants, &corpus.unrelated})
    for (const Text& t : *texts) {
      if (Status st = tokenizer.Tokenize(t.text, &tokens); !st.ok()) return st;
      uint32_t n = 0;
      for (const WeightedToken& w : tokens) n += w.weight;
      items.push_back(Item{&t, Simhash(tokens, 0), n});
    }
  std::vector<FalseMatch> all;
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t j = i + 1; j < items.size(); ++j) {
      const Item &a = items[i], &b = items[j];
      if (a.t->lang != b.t->lang || (a.t->story >= 0 && a.t->story == b.t->story)) continue;
      const int d = HammingDistance(a.fp, b.fp);
      if (d <= kMinK) all.push_back(FalseMatch{a.t, b.t, d, std::min(a.tokens, b.tokens)});
    }
  std::stable_sort(all.begin(), all.end(),
                   [](const FalseMatch& x, const FalseMatch& y) { return x.tokens < y.tokens; });
  if (all.size() > limit) all.resize(limit);
  *out = std::move(all);
  return Status::Ok();
}

std::string Report(const Measurement& m) {
  std::string r;
  r += "Recall at distance <= 3 by edit kind and length (tokens of the shorter text), "
       "percent (pairs):\n\n| language | edit |";
  for (int b = 0; b < kBuckets; ++b) r += " " + BucketName(b) + " |";
  r += " all |\n|---|---|";
  for (int b = 0; b <= kBuckets; ++b) r += "---:|";
  r += "\n";
  for (int lang = 0; lang < 2; ++lang)
    for (int e = -1; e < kEditCount; ++e) {
      r += std::string("| ") + LangName(static_cast<Lang>(lang)) + " | " +
           (e < 0 ? std::string("**all edits**") : EditName(kEdits[e])) + " |";
      for (int b = 0; b <= kBuckets; ++b) {
        const Counts c =
            b < kBuckets ? m.Positives(lang, e, b, b) : m.Positives(lang, e, 0, kBuckets - 1);
        r += " " + Percent(c.matched[0], c.pairs) + " (" + std::to_string(c.pairs) + ") |";
      }
      r += "\n";
    }
  r += "\nRecall, false matches and precision by maximum distance k and length "
       "(all edits; negatives: all pairs of different stories):\n\n"
       "| language | tokens | positives | negative pairs |";
  for (int k = kMinK; k <= kMaxK; ++k)
    r += " recall k=" + std::to_string(k) + " | false k=" + std::to_string(k) +
         " | precision k=" + std::to_string(k) + " |";
  r += "\n|---|---|---:|---:|";
  for (int k = kMinK; k <= kMaxK; ++k) r += "---:|---:|---:|";
  r += "\n";
  for (int lang = 0; lang < 2; ++lang)
    for (int b = -1; b < kBuckets; ++b) {
      const int from = b < 0 ? 0 : b, to = b < 0 ? kBuckets - 1 : b;
      const Counts p = m.Positives(lang, -1, from, to), n = m.Negatives(lang, from, to);
      r += std::string("| ") + LangName(static_cast<Lang>(lang)) + " | " +
           (b < 0 ? std::string("all") : BucketName(b)) + " | " + std::to_string(p.pairs) + " | " +
           std::to_string(n.pairs) + " |";
      for (int i = 0; i < kKs; ++i)
        r += " " + Percent(p.matched[i], p.pairs) + " | " + std::to_string(n.matched[i]) + " | " +
             Percent(p.matched[i], p.matched[i] + n.matched[i]) + " |";
      r += "\n";
    }
  return r;
}

}  // namespace ef::content::corpus
