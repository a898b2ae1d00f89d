// Precision and recall of near-duplicate detection on a corpus (corpus.h), by
// brute force in memory: every text is tokenized (content::Tokenizer) and
// fingerprinted (content::Simhash, seed 0), then
//   - positives: each variant with its original (a match: distance <= k);
//   - negatives: every pair of texts of the same language from different
//     originals (unrelated texts count as their own); a match is a false match;
// for k = kMinK .. kMaxK. A pair's length bucket is that of its shorter text,
// in tokens (Bucket). recall = matched positives / positives;
// precision = matched positives / (matched positives + false matches).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "content/corpus.h"

namespace ef::content::corpus {

inline constexpr int kMinK = 3, kMaxK = 6, kKs = kMaxK - kMinK + 1;
inline constexpr int kBuckets = 7;
// Token-count buckets: [1,8) [8,16) [16,32) [32,64) [64,128) [128,256) [256,inf).
int Bucket(uint32_t tokens);
std::string BucketName(int bucket);
inline constexpr int kEditCount = static_cast<int>(sizeof(kEdits) / sizeof(kEdits[0]));

struct Counts {
  uint64_t pairs = 0;
  std::array<uint64_t, kKs> matched{};  // pairs within distance kMinK + i
};

struct Measurement {
  // [lang][edit][bucket]: positives; [lang][bucket]: negatives.
  Counts positive[2][kEditCount][kBuckets];
  Counts negative[2][kBuckets];
  size_t texts[2] = {0, 0};
  uint64_t tokens[2] = {0, 0};  // summed over texts
  uint64_t chars[2] = {0, 0};   // code points, summed over texts

  Counts Positives(int lang, int edit, int bucket_from, int bucket_to) const;  // -1: all edits
  Counts Negatives(int lang, int bucket_from, int bucket_to) const;
};

Status Measure(const Corpus& corpus, Measurement* out);

// Up to `limit` negative pairs within distance kMinK (texts of different
// stories that match), shortest first: what the false matches are.
struct FalseMatch {
  const Text* a;
  const Text* b;
  int distance;
  uint32_t tokens;  // of the shorter text
};
Status FalseMatches(const Corpus& corpus, size_t limit, std::vector<FalseMatch>* out);

// The tables of docs/CONTENT.md "Precision and recall" (Markdown).
std::string Report(const Measurement& m);

}  // namespace ef::content::corpus
