// Test stories for the items topic (docs/CONTENT.md "Items topic", rule 5):
// an original text of at least 256 tokens from Debian's `fortunes`, a re-post
// of it within content.max_distance, and an unrelated text. Shared by the
// consumer and the near-duplicate end-to-end tests.
#pragma once

#include <cstdint>
#include <string>

namespace ef::content::stories {

struct Texts {
  std::string original, repost, unrelated;
};

// The fingerprint of text by the default tokenization (CONTENT.md rules 1-2,
// seed 0); *tokens (if given) = the sum of its token weights.
uint64_t Fingerprint(const std::string& text, uint32_t* tokens = nullptr);

// An original of at least 256 tokens (consecutive fortunes as paragraphs), a
// re-post of it with a sentence inserted or removed, or a new headline
// (tests/content/corpus.h edits), whose fingerprint is 1 to 3 bits
// (content.max_distance) from the original's: CONTENT.md measures that most such
// re-posts of 256 tokens and more are; the first one in file order is taken. And
// an unrelated text, far from both. FAILs (Catch) if the file has none.
Texts MakeTexts();

}  // namespace ef::content::stories
