// A corpus of real texts with near-duplicate ground truth, for measuring the
// content fingerprint (docs/CONTENT.md "Precision and recall"): the test
// tests/content/corpus_test.cc, the tool bench/content_corpus.cc and the
// throughput cases of bench/content_bench.cc build it.
//
// Sources: the Debian packages `fortunes` (English) and `fortunes-zh` (Chinese),
// files of entries separated by lines "%", read as UTF-8 (ANSI colour escapes and
// backspace overstrikes removed; entries that are not valid UTF-8 are dropped).
// Per language, the entries (in file order, files in a fixed order) make:
//   - originals: single entries (short) and "stories" of 3 to 6 consecutive
//     entries of one file as paragraphs separated by a blank line (long);
//   - variants of each original, one per edit kind a re-poster makes (Edit);
//   - unrelated texts: entries used by no original, of the same language.
// Deterministic: the same files and options give the same corpus (Digest), with
// a fixed-seed std::mt19937_64 whose output the C++ standard specifies (no
// std::*_distribution, whose output is implementation-defined).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ef::content::corpus {

enum class Lang { kEnglish, kChinese };
inline constexpr Lang kLangs[] = {Lang::kEnglish, Lang::kChinese};
const char* LangName(Lang lang);

// The edits of a variant (each from its original).
enum class Edit {
  kHeadline,     // the first line replaced by the first line of an unrelated text
                 // (texts of 4 lines or more), else such a line added before it
  kInsert,       // one sentence of an unrelated text inserted at a sentence boundary
  kRemove,       // one sentence (at most half of the text's bytes) removed
  kReorder,      // paragraphs shuffled (stories), else lines (2 lines or more)
  kPunctuation,  // about a third of the punctuation marks deleted or changed
  kWidth,        // English: printable ASCII to full-width (U+FF01..FF5E, space
                 // U+3000); Chinese: full-width punctuation to ASCII, ASCII
                 // letters and digits to full-width
  kRepost,       // headline + one inserted sentence + punctuation together
  kQuotes,       // straight quotes to typographic ones and back: ' to U+2018 (at a
                 // word's start) or U+2019, " to U+201C or U+201D, "--" to U+2014;
                 // U+2018/U+2019 to ', U+201C/U+201D to ", U+2014 to "--"
  kLineBreaks,   // each paragraph's lines, without White_Space at their ends,
                 // joined (1 text in 3) or wrapped again at another width:
                 // English at spaces, 40 to 72 columns, lines joined with a
                 // space; Chinese after 8 to 30 characters but not between two
                 // printable ASCII ones, lines joined without a space (with one
                 // between two printable ASCII characters)
};
inline constexpr Edit kEdits[] = {Edit::kHeadline, Edit::kInsert,      Edit::kRemove,
                                  Edit::kReorder,  Edit::kPunctuation, Edit::kWidth,
                                  Edit::kRepost,   Edit::kQuotes,      Edit::kLineBreaks};
const char* EditName(Edit edit);

struct Text {
  Lang lang = Lang::kEnglish;
  std::string text;  // UTF-8
  int story = -1;    // index of its original in Corpus::originals; -1: unrelated
  bool is_variant = false;
  Edit edit = Edit::kHeadline;  // for a variant
};

struct Corpus {
  std::vector<Text> originals;  // story = own index
  std::vector<Text> variants;   // story = the original's index
  std::vector<Text> unrelated;  // story = -1
};

struct Options {
  std::string dir = "/usr/share/games/fortunes";  // env EF_FORTUNES_DIR overrides
  size_t singles_per_lang = 1200;                 // originals of one entry, per language
  size_t stories_per_lang = 300;                  // originals of 3..6 entries, per language
  size_t unrelated_per_lang = 1500;
  uint64_t seed = 31;
};

// The entries of one fortune file (cleaned as above), in file order.
Status ReadFortunes(const std::string& path, std::vector<std::string>* out);

// The corpus from the files under opt.dir (kNotFound when a file is missing).
Status Build(const Options& opt, Corpus* out);

// A digest of every text of the corpus, in order (for determinism checks).
uint64_t Digest(const Corpus& corpus);

// The edit functions, exposed for the tests: each returns the edited text, or
// "" when the edit does not apply to `text` (e.g. kRemove on one sentence).
// `donor` is an unrelated text of the same language (headline, inserted sentence).
std::string ApplyEdit(Edit edit, Lang lang, std::string_view text, std::string_view donor,
                      uint64_t random);

// Width change of one text (kWidth).
std::string ChangeWidth(Lang lang, std::string_view text);

}  // namespace ef::content::corpus
