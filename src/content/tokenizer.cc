#include "content/tokenizer.h"

#include <unicode/brkiter.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/uscript.h>
#include <unicode/utf16.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

namespace ef::content {
namespace {

// Step 3: the replacement of a typographic quote, apostrophe or dash (after
// NFKC_Casefold), or u itself.
char16_t FoldMark(char16_t u) {
  switch (u) {
    case 0x2018:  // LEFT SINGLE QUOTATION MARK
    case 0x2019:  // RIGHT SINGLE QUOTATION MARK
    case 0x201B:  // SINGLE HIGH-REVERSED-9 QUOTATION MARK
    case 0x2032:  // PRIME
    case 0xFF07:  // FULLWIDTH APOSTROPHE (NFKC: ')
      return u'\'';
    case 0x201C:  // LEFT DOUBLE QUOTATION MARK
    case 0x201D:  // RIGHT DOUBLE QUOTATION MARK
    case 0x201E:  // DOUBLE LOW-9 QUOTATION MARK
    case 0x201F:  // DOUBLE HIGH-REVERSED-9 QUOTATION MARK
    case 0x2033:  // DOUBLE PRIME (NFKC: two PRIMEs)
      return u'"';
    case 0x2010:  // HYPHEN
    case 0x2011:  // NON-BREAKING HYPHEN (NFKC: HYPHEN)
    case 0x2012:  // FIGURE DASH
    case 0x2013:  // EN DASH
    case 0x2014:  // EM DASH
    case 0x2015:  // HORIZONTAL BAR
    case 0x2212:  // MINUS SIGN
    case 0xFE58:  // SMALL EM DASH (NFKC: EM DASH)
    case 0xFE63:  // SMALL HYPHEN-MINUS (NFKC: -)
    case 0xFF0D:  // FULLWIDTH HYPHEN-MINUS (NFKC: -)
      return u'-';
    default:
      return u;
  }
}

// Step 4's line breaks: the mandatory breaks of UAX #14 (LF, VT, FF, CR, NEL,
// LINE SEPARATOR, PARAGRAPH SEPARATOR).
bool IsLineBreak(char16_t u) {
  return u < 0x2010 ? (u >= 0x0A && u <= 0x0D) || u == 0x85 : u == 0x2028 || u == 0x2029;
}

// Step 4's CJK characters: Script_Extensions has Han, Hiragana or Katakana. None
// is below U+2E80 (tokenizer_test.cc checks it on the ICU in use): a line break
// between two Latin letters costs no property lookup.
bool IsCjk(UChar32 c) {
  return c >= 0x2E80 &&
         (uscript_hasScript(c, USCRIPT_HAN) || uscript_hasScript(c, USCRIPT_HIRAGANA) ||
          uscript_hasScript(c, USCRIPT_KATAKANA));
}

bool IsWhite(char16_t u) { return u_isUWhiteSpace(u); }  // all of White_Space is in the BMP

// Steps 3 and 4 in place, in one pass: marks folded, and every run of white
// space that holds a line break and lies between two CJK characters removed.
void FoldAndJoin(icu::UnicodeString& s) {
  const int32_t n = s.length();
  char16_t* buf = s.getBuffer(n);
  if (buf == nullptr) return;  // (out of memory: left as it is)
  int32_t w = 0;
  for (int32_t r = 0; r < n;) {
    const char16_t u = buf[r];
    if (!IsLineBreak(u)) {
      buf[w++] = u < 0x2010 ? u : FoldMark(u);
      ++r;
      continue;
    }
    // The run of white space around this line break, its first.
    int32_t start = w;  // (what precedes it is written already)
    while (start > 0 && IsWhite(buf[start - 1])) --start;
    int32_t end = r + 1;
    while (end < n && IsWhite(buf[end])) ++end;
    if (start > 0 && end < n) {
      UChar32 before, after;
      int32_t p = start, q = end;
      U16_PREV(buf, 0, p, before);
      U16_NEXT(buf, q, n, after);
      if (IsCjk(before) && IsCjk(after)) {
        w = start;
        r = end;
        continue;
      }
    }
    while (r < end) buf[w++] = buf[r++];  // kept, whole (its line breaks are seen once)
  }
  s.releaseBuffer(w);
}

}  // namespace

size_t InvalidUtf8Offset(std::string_view s) {
  // The well-formed byte sequences of Unicode's Table 3-7.
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    uint64_t eight;  // ASCII, 8 bytes at a time
    if (n - i >= 8 && (std::memcpy(&eight, p + i, 8), (eight & 0x8080808080808080ULL) == 0)) {
      i += 8;
      continue;
    }
    const uint8_t b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;  // no overlong forms
      if (b == 0xED) hi = 0x9F;  // no surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;  // no overlong forms
      if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (n - i < len || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if ((p[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return std::string_view::npos;
}

struct Tokenizer::Impl {
  const icu::Normalizer2* nfkc_cf = nullptr;
  std::unique_ptr<icu::BreakIterator> words;
  std::string init_error;
  std::unordered_map<std::string, size_t> index;  // token -> its entry in out
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {
  UErrorCode st = U_ZERO_ERROR;
  impl_->nfkc_cf = icu::Normalizer2::getNFKCCasefoldInstance(st);
  if (U_FAILURE(st)) {
    impl_->init_error = std::string("ICU NFKC_Casefold: ") + u_errorName(st);
    return;
  }
  impl_->words.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), st));
  if (U_FAILURE(st)) impl_->init_error = std::string("ICU word break iterator: ") + u_errorName(st);
}

Tokenizer::~Tokenizer() = default;

Status Tokenizer::Tokenize(std::string_view utf8, std::vector<WeightedToken>* out) {
  out->clear();
  if (!impl_->init_error.empty()) return Internal(impl_->init_error);
  // Valid UTF-8 only: ICU would replace a bad sequence silently.
  if (utf8.size() > static_cast<size_t>(INT32_MAX))
    return InvalidArgument("text: longer than 2^31 - 1 bytes");
  if (const size_t at = InvalidUtf8Offset(utf8); at != std::string_view::npos)
    return InvalidArgument("text: invalid UTF-8 at byte " + std::to_string(at));
  UErrorCode st = U_ZERO_ERROR;
  const icu::UnicodeString text = icu::UnicodeString::fromUTF8(
      icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  icu::UnicodeString folded = impl_->nfkc_cf->normalize(text, st);
  if (U_FAILURE(st)) return Internal(std::string("ICU normalize: ") + u_errorName(st));
  FoldAndJoin(folded);
  icu::BreakIterator& it = *impl_->words;
  it.setText(folded);
  impl_->index.clear();
  std::string token;
  for (int32_t start = it.first(), end = it.next(); end != icu::BreakIterator::DONE;
       start = end, end = it.next()) {
    if (it.getRuleStatus() < UBRK_WORD_NONE_LIMIT) continue;  // spaces, punctuation
    token.clear();
    folded.tempSubStringBetween(start, end).toUTF8String(token);
    auto [entry, added] = impl_->index.try_emplace(token, out->size());
    if (added) {
      out->push_back(WeightedToken{token, 1});
    } else {
      ++(*out)[entry->second].weight;
    }
  }
  return Status::Ok();
}

}  // namespace ef::content
