#include "content/tokenizer.h"

#include <unicode/brkiter.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include <string>
#include <unordered_map>

namespace ef::content {

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
  for (int32_t i = 0, n = static_cast<int32_t>(utf8.size()); i < n;) {
    UChar32 c;
    const int32_t at = i;
    U8_NEXT(reinterpret_cast<const uint8_t*>(utf8.data()), i, n, c);
    if (c < 0) return InvalidArgument("text: invalid UTF-8 at byte " + std::to_string(at));
  }
  UErrorCode st = U_ZERO_ERROR;
  const icu::UnicodeString text = icu::UnicodeString::fromUTF8(
      icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  const icu::UnicodeString folded = impl_->nfkc_cf->normalize(text, st);
  if (U_FAILURE(st)) return Internal(std::string("ICU normalize: ") + u_errorName(st));
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
