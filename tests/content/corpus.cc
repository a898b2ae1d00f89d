#include "content/corpus.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_set>
#include <utility>

namespace ef::content::corpus {
namespace {

const char* const kEnglishFiles[] = {
    "fortunes",  "literature", "wisdom",     "people",        "science",
    "computers", "cookie",     "humorists",  "politics",      "work",
    "love",      "men-women",  "platitudes", "education",     "food",
    "law",       "medicine",   "news",       "sports",        "riddles",
    "pets",      "kids",       "art",        "miscellaneous", "songs-poems"};
const char* const kChineseFiles[] = {"tang300", "song100", "chinese"};

// Removes ANSI escapes (ESC '[' ... final byte) and overstrikes (x BS y -> y).
std::string Clean(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\x1b') {
      if (i + 1 < s.size() && s[i + 1] == '[') {
        i += 2;
        while (i < s.size() && !(s[i] >= 0x40 && s[i] <= 0x7e)) ++i;
      }
      continue;
    }
    if (c == '\b') {
      // Drop the whole UTF-8 character before the backspace.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xc0) == 0x80)
        out.pop_back();
      if (!out.empty()) out.pop_back();
      continue;
    }
    out += c;
  }
  // Trim blank lines at both ends.
  const size_t b = out.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  const size_t e = out.find_last_not_of(" \t\n");
  return out.substr(b, e - b + 1);
}

bool ValidUtf8(std::string_view s) {
  for (int32_t i = 0, n = static_cast<int32_t>(s.size()); i < n;) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), i, n, c);
    if (c < 0) return false;
  }
  return true;
}

bool HasLetter(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80 || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) return true;
  return false;
}

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

size_t Below(std::mt19937_64& rng, size_t n) { return n == 0 ? 0 : rng() % n; }

template <typename T>
void Shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(rng, i)]);
}

std::vector<std::string> SplitOn(std::string_view s, std::string_view sep) {
  std::vector<std::string> out;
  for (size_t at = 0;;) {
    const size_t next = s.find(sep, at);
    if (next == std::string_view::npos) {
      out.emplace_back(s.substr(at));
      return out;
    }
    out.emplace_back(s.substr(at, next - at));
    at = next + sep.size();
  }
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// Sentences: pieces whose concatenation is the text, each ending after a
// terminator (. ! ? followed by white space; 。！？；) and its white space.
std::vector<std::string> Sentences(std::string_view s) {
  static const std::string_view kWide[] = {"\u3002", "\uff01", "\uff1f", "\uff1b"};
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t end = 0;  // end of a terminator at i, if any
    const char c = s[i];
    if ((c == '.' || c == '!' || c == '?') &&
        (i + 1 == s.size() || s[i + 1] == ' ' || s[i + 1] == '\n'))
      end = i + 1;
    for (std::string_view w : kWide)
      if (s.substr(i, w.size()) == w) end = i + w.size();
    if (end == 0) {
      ++i;
      continue;
    }
    while (end < s.size() && (s[end] == ' ' || s[end] == '\n')) ++end;
    out.emplace_back(s.substr(start, end - start));
    start = i = end;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string FirstLine(std::string_view s) { return Trim(s.substr(0, s.find('\n'))); }

void AppendUtf8(std::string& out, UChar32 c) {
  char buf[4];
  int32_t n = 0;
  UBool error = false;
  U8_APPEND(reinterpret_cast<uint8_t*>(buf), n, 4, c, error);
  if (error) return;  // not a scalar value: dropped
  out.append(buf, static_cast<size_t>(n));
}

std::string Headline(std::string_view text, std::string_view donor) {
  const std::string head = FirstLine(donor);
  std::vector<std::string> lines = SplitOn(text, "\n");
  if (lines.size() >= 4) {
    lines[0] = head;
    return Join(lines, "\n");
  }
  return head + "\n" + std::string(text);
}

std::string Insert(Lang lang, std::string_view text, std::string_view donor, std::mt19937_64& rng) {
  const std::vector<std::string> from = Sentences(donor);
  std::string sentence = Trim(from[Below(rng, from.size())]);
  sentence += lang == Lang::kEnglish ? " " : "";
  std::vector<std::string> to = Sentences(text);
  to.insert(to.begin() + static_cast<long>(Below(rng, to.size() + 1)), sentence);
  return Join(to, "");
}

std::string Remove(std::string_view text, std::mt19937_64& rng) {
  // A sentence of at most half the text: the rest stays the story (not only,
  // say, its attribution line).
  std::vector<std::string> s = Sentences(text);
  std::vector<size_t> removable;
  for (size_t i = 0; i < s.size(); ++i)
    if (2 * s[i].size() <= text.size()) removable.push_back(i);
  if (removable.empty()) return "";
  s.erase(s.begin() + static_cast<long>(removable[Below(rng, removable.size())]));
  return Trim(Join(s, ""));
}

std::string Reorder(std::string_view text, std::mt19937_64& rng) {
  const bool story = text.find("\n\n") != std::string_view::npos;
  const std::string_view sep = story ? "\n\n" : "\n";
  std::vector<std::string> parts = SplitOn(text, sep);
  if (parts.size() < 2) return "";
  const std::vector<std::string> before = parts;
  Shuffle(parts, rng);
  if (parts == before) std::rotate(parts.begin(), parts.begin() + 1, parts.end());
  return Join(parts, sep);
}

std::string Punctuation(std::string_view text, std::mt19937_64& rng) {
  static const std::vector<UChar32> kMarks = {',',    '.',    ';',    ':',    '!',    '?',
                                              '"',    '\'',   '-',    0xff0c, 0x3002, 0xff01,
                                              0xff1f, 0xff1b, 0xff1a, 0x3001, 0x201c, 0x201d};
  std::string out;
  for (int32_t i = 0, n = static_cast<int32_t>(text.size()); i < n;) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, n, c);
    const bool mark = std::find(kMarks.begin(), kMarks.end(), c) != kMarks.end();
    const uint64_t r = rng() % 6;
    if (!mark || r >= 2) {
      AppendUtf8(out, c);
    } else if (r == 1) {  // changed: another mark of the same script
      const size_t base = c < 0x80 ? 0 : 9, count = c < 0x80 ? 6 : 9;
      AppendUtf8(out, kMarks[base + Below(rng, count)]);
    }  // r == 0: deleted
  }
  return out;
}

// kQuotes: straight quotes and "--" to typographic ones, and typographic ones back.
std::string Quotes(std::string_view text) {
  std::string out;
  UChar32 prev = ' ';
  for (int32_t i = 0, n = static_cast<int32_t>(text.size()); i < n;) {
    if (text.substr(static_cast<size_t>(i), 2) == "--") {
      AppendUtf8(out, 0x2014);
      prev = 0x2014;
      i += 2;
      continue;
    }
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, n, c);
    // An opening quote: at the start, after white space, a bracket or a dash.
    const bool opening = prev == ' ' || prev == '\n' || prev == '\t' || prev == '(' ||
                         prev == '[' || prev == 0x2014 || prev == 0x3000;
    switch (c) {
      case '\'':
        AppendUtf8(out, opening ? 0x2018 : 0x2019);
        break;
      case '"':
        AppendUtf8(out, opening ? 0x201c : 0x201d);
        break;
      case 0x2018:
      case 0x2019:
        out += '\'';
        break;
      case 0x201c:
      case 0x201d:
        out += '"';
        break;
      case 0x2014:
        out += "--";
        break;
      default:
        AppendUtf8(out, c);
    }
    prev = c;
  }
  return out;
}

bool IsAsciiGraph(UChar32 c) { return c > 0x20 && c < 0x7f; }

// kLineBreaks: each paragraph's lines joined, then (unless `join`) wrapped again.
std::string LineBreaks(Lang lang, std::string_view text, std::mt19937_64& rng) {
  const bool join = rng() % 3 == 0;
  const size_t width = lang == Lang::kEnglish ? 40 + Below(rng, 33) : 8 + Below(rng, 23);
  std::vector<std::string> paragraphs = SplitOn(text, "\n\n");
  for (std::string& paragraph : paragraphs) {
    std::u32string joined;  // code points
    for (const std::string& line : SplitOn(paragraph, "\n")) {
      std::u32string cps;  // the line without white space (White_Space) at its ends
      for (int32_t i = 0, n = static_cast<int32_t>(line.size()); i < n;) {
        UChar32 c;
        U8_NEXT(reinterpret_cast<const uint8_t*>(line.data()), i, n, c);
        cps += static_cast<char32_t>(c);
      }
      while (!cps.empty() && u_isUWhiteSpace(static_cast<UChar32>(cps.back()))) cps.pop_back();
      size_t lead = 0;
      while (lead < cps.size() && u_isUWhiteSpace(static_cast<UChar32>(cps[lead]))) ++lead;
      cps.erase(0, lead);
      if (cps.empty()) continue;
      if (!joined.empty() &&
          (lang == Lang::kEnglish || (IsAsciiGraph(static_cast<UChar32>(joined.back())) &&
                                      IsAsciiGraph(static_cast<UChar32>(cps.front())))))
        joined += U' ';
      joined += cps;
    }
    std::u32string wrapped;
    if (join) {
      wrapped = joined;
    } else if (lang == Lang::kEnglish) {  // greedy, at spaces
      size_t column = 0;
      size_t start = 0;
      while (start < joined.size()) {
        size_t end = joined.find(U' ', start);
        if (end == std::u32string::npos) end = joined.size();
        const size_t len = end - start;
        if (column > 0 && column + 1 + len > width) {
          wrapped += U'\n';
          column = 0;
        } else if (column > 0) {
          wrapped += U' ';
          ++column;
        }
        wrapped.append(joined, start, len);
        column += len;
        start = end + 1;
      }
    } else {  // after `width` characters, not between two ASCII characters
      size_t column = 0;
      for (size_t i = 0; i < joined.size(); ++i) {
        if (column >= width && !(IsAsciiGraph(static_cast<UChar32>(joined[i - 1])) &&
                                 IsAsciiGraph(static_cast<UChar32>(joined[i])))) {
          if (wrapped.back() == U' ') wrapped.pop_back();
          wrapped += U'\n';
          column = 0;
          if (joined[i] == U' ') continue;
        }
        wrapped += joined[i];
        ++column;
      }
    }
    paragraph.clear();
    for (char32_t c : wrapped) AppendUtf8(paragraph, static_cast<UChar32>(c));
  }
  return Join(paragraphs, "\n\n");
}

}  // namespace

const char* LangName(Lang lang) { return lang == Lang::kEnglish ? "English" : "Chinese"; }

const char* EditName(Edit edit) {
  switch (edit) {
    case Edit::kHeadline:
      return "headline";
    case Edit::kInsert:
      return "insert sentence";
    case Edit::kRemove:
      return "remove sentence";
    case Edit::kReorder:
      return "reorder";
    case Edit::kPunctuation:
      return "punctuation";
    case Edit::kWidth:
      return "width";
    case Edit::kRepost:
      return "repost";
    case Edit::kQuotes:
      return "quotes";
    case Edit::kLineBreaks:
      return "line breaks";
  }
  return "?";
}

std::string ChangeWidth(Lang lang, std::string_view text) {
  std::string out;
  for (int32_t i = 0, n = static_cast<int32_t>(text.size()); i < n;) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, n, c);
    if (lang == Lang::kEnglish) {
      if (c == ' ')
        c = 0x3000;
      else if (c >= 0x21 && c <= 0x7e)
        c += 0xff01 - 0x21;
    } else {
      if (c >= 0xff01 && c <= 0xff5e &&
          !((c >= 0xff10 && c <= 0xff19) || (c >= 0xff21 && c <= 0xff3a) ||
            (c >= 0xff41 && c <= 0xff5a)))
        c -= 0xff01 - 0x21;  // full-width punctuation to ASCII
      else if (c == 0x3002)
        c = '.';
      else if (c == 0x3001)
        c = ',';
      else if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
        c += 0xff01 - 0x21;
    }
    AppendUtf8(out, c);
  }
  return out;
}

std::string ApplyEdit(Edit edit, Lang lang, std::string_view text, std::string_view donor,
                      uint64_t random) {
  std::mt19937_64 rng(random);
  switch (edit) {
    case Edit::kHeadline:
      return Headline(text, donor);
    case Edit::kInsert:
      return Insert(lang, text, donor, rng);
    case Edit::kRemove:
      return Remove(text, rng);
    case Edit::kReorder:
      return Reorder(text, rng);
    case Edit::kPunctuation:
      return Punctuation(text, rng);
    case Edit::kWidth:
      return ChangeWidth(lang, text);
    case Edit::kRepost:
      return Punctuation(Insert(lang, Headline(text, donor), donor, rng), rng);
    case Edit::kQuotes:
      return Quotes(text);
    case Edit::kLineBreaks:
      return LineBreaks(lang, text, rng);
  }
  return "";
}

Status ReadFortunes(const std::string& path, std::vector<std::string>* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return NotFound(path + ": cannot open (install the Debian packages fortunes, fortunes-zh)");
  std::ostringstream all;
  all << in.rdbuf();
  std::string entry;
  std::istringstream lines(all.str());
  auto flush = [&] {
    std::string cleaned = Clean(entry);
    if (!cleaned.empty() && HasLetter(cleaned) && ValidUtf8(cleaned))
      out->push_back(std::move(cleaned));
    entry.clear();
  };
  for (std::string line; std::getline(lines, line);) {
    if (line == "%") {
      flush();
    } else {
      entry += line;
      entry += '\n';
    }
  }
  flush();
  return Status::Ok();
}

Status Build(const Options& opt, Corpus* out) {
  *out = Corpus{};
  std::string dir = opt.dir;
  if (const char* env = std::getenv("EF_FORTUNES_DIR"); env && *env) dir = env;
  std::unordered_set<std::string> seen;  // the same entry in two files: kept once
  for (Lang lang : kLangs) {
    // Chunks of consecutive entries of one file: a single, or a story of 3..6.
    std::vector<std::vector<std::string>> chunks;
    std::mt19937_64 rng(Mix(opt.seed) ^ static_cast<uint64_t>(lang));
    const auto add_file = [&](const char* name) -> Status {
      std::vector<std::string> entries;
      if (Status st = ReadFortunes(dir + "/" + name, &entries); !st.ok()) return st;
      std::vector<std::string> fresh;
      for (std::string& e : entries)
        if (seen.insert(e).second) fresh.push_back(std::move(e));
      for (size_t i = 0; i < fresh.size();) {
        const size_t n = rng() % 4 == 0 ? 3 + Below(rng, 4) : 1;
        const size_t take = std::min(n, fresh.size() - i);
        chunks.emplace_back(fresh.begin() + static_cast<long>(i),
                            fresh.begin() + static_cast<long>(i + take));
        i += take;
      }
      return Status::Ok();
    };
    if (lang == Lang::kEnglish) {
      for (const char* f : kEnglishFiles)
        if (Status st = add_file(f); !st.ok()) return st;
    } else {
      for (const char* f : kChineseFiles)
        if (Status st = add_file(f); !st.ok()) return st;
    }
    Shuffle(chunks, rng);
    size_t singles = 0, stories = 0, unrelated = 0;
    const size_t first_original = out->originals.size();
    for (const auto& chunk : chunks) {
      Text t{lang, Join(chunk, "\n\n")};
      if (chunk.size() >= 3 && stories < opt.stories_per_lang) {
        ++stories;
      } else if (chunk.size() == 1 && singles < opt.singles_per_lang) {
        ++singles;
      } else if (unrelated < opt.unrelated_per_lang) {
        ++unrelated;
        out->unrelated.push_back(std::move(t));
        continue;
      } else {
        continue;
      }
      t.story = static_cast<int>(out->originals.size());
      out->originals.push_back(std::move(t));
    }
    // The donors of headlines and inserted sentences: unrelated texts of the language.
    std::vector<const Text*> donors;
    for (const Text& u : out->unrelated)
      if (u.lang == lang) donors.push_back(&u);
    if (donors.empty()) return NotFound(std::string("no unrelated ") + LangName(lang) + " texts");
    for (size_t o = first_original; o < out->originals.size(); ++o) {
      for (Edit edit : kEdits) {
        const uint64_t random = Mix(opt.seed ^ Mix(o * 16 + static_cast<uint64_t>(edit)));
        const Text& donor = *donors[random % donors.size()];
        std::string v = ApplyEdit(edit, lang, out->originals[o].text, donor.text, random);
        if (v.empty() || v == out->originals[o].text) continue;  // the edit does not apply
        out->variants.push_back(Text{lang, std::move(v), static_cast<int>(o), true, edit});
      }
    }
  }
  return Status::Ok();
}

uint64_t Digest(const Corpus& corpus) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  for (const auto* texts : {&corpus.originals, &corpus.variants, &corpus.unrelated})
    for (const Text& t : *texts) {
      XXH64_update(st, t.text.data(), t.text.size() + 1);  // with its '\0'
      const int32_t meta[] = {static_cast<int32_t>(t.lang), t.story, static_cast<int32_t>(t.edit)};
      XXH64_update(st, meta, sizeof(meta));
    }
  const uint64_t d = XXH64_digest(st);
  XXH64_freeState(st);
  return d;
}

}  // namespace ef::content::corpus
