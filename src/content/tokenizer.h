// Tokenization of text for the content fingerprint (docs/CONTENT.md "2. Text"):
// implementation-defined (other implementations may differ and pass tokens with
// weights instead), documented so that it can be reproduced; the vectors of
// CONTENT.md "Rule 2 vectors" hold for ICU 72 (Debian 12):
//   1. the text must be valid UTF-8 (else kInvalidArgument naming the byte offset)
//      of at most 2^31 - 1 bytes (ICU's lengths are int32_t);
//   2. Unicode NFKC_Casefold (ICU): compatibility forms (full-width letters and
//      digits, ligatures) become their plain forms, and case is folded;
//   3. typographic quotes, apostrophes and dashes fold to ASCII: U+2018 U+2019
//      U+201B U+2032 U+FF07 to ', U+201C..U+201F U+2033 to ", U+2010..U+2015
//      U+2212 U+FE58 U+FE63 U+FF0D to - (after step 2, so their compatibility
//      forms too; U+2033 is two U+2032 by then, so ''): "don’t" is "don't";
//   4. a run of white space (White_Space) that holds a line break (LF, VT, FF,
//      CR, NEL, U+2028, U+2029) between two CJK characters (Script_Extensions
//      has Han, Hiragana or Katakana) is removed: such a break is no word
//      boundary, so re-wrapped Chinese or Japanese segments as when unwrapped.
//      Not Hangul (Korean separates words by spaces), not a run without a line
//      break, not next to any other character;
//   5. word segmentation by ICU's word BreakIterator for the root locale (UAX #29,
//      with ICU's dictionaries for Chinese, Japanese, Thai, ...): the segments
//      whose rule status is a word (letters, numbers, kana, ideographs) are the
//      tokens; spaces and punctuation are not;
//   6. weight = the token's count in the text (term frequency), tokens in order
//      of first occurrence.
// Steps 3 and 4 are one pass over the normalised text. The tokens (so the
// fingerprints) of a text can change with the ICU version (its dictionaries and
// Unicode data): a fingerprint is comparable with fingerprints made by the same
// tokenization.
// Not thread-safe (holds ICU's iterator); one per thread. InvalidUtf8Offset is.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "content/simhash.h"

namespace ef::content {

// The byte offset of the first ill-formed sequence of `s` (Unicode's UTF-8: no
// overlong forms, surrogates or code points above U+10FFFF), or
// std::string_view::npos when `s` is well-formed UTF-8 (step 1).
size_t InvalidUtf8Offset(std::string_view s);

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
