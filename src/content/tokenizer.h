// Tokenization of text for the content fingerprint (docs/CONTENT.md "2. Text"):
// implementation-defined (other implementations may differ and pass tokens with
// weights instead), documented so that it can be reproduced:
//   1. the text must be valid UTF-8 (else kInvalidArgument naming the byte offset);
//   2. Unicode NFKC_Casefold (ICU): compatibility forms (full-width letters and
//      digits, ligatures) become their plain forms, and case is folded;
//   3. word segmentation by ICU's word BreakIterator for the root locale (UAX #29,
//      with ICU's dictionaries for Chinese, Japanese, Thai, ...): the segments
//      whose rule status is a word (letters, numbers, kana, ideographs) are the
//      tokens; spaces and punctuation are not;
//   4. weight = the token's count in the text (term frequency), tokens in order
//      of first occurrence.
// Not thread-safe (holds ICU's iterator); one per thread.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "content/simhash.h"

namespace ef::content {

class Tokenizer {
 public:
  Tokenizer();
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // The weighted tokens of `utf8` into *out (cleared first).
  Status Tokenize(std::string_view utf8, std::vector<WeightedToken>* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef::content
