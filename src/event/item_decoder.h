// JSON items of the items topic (docs/CONTENT.md "Items topic") -> an item ID and
// its content fingerprint, or a reject reason. With simdjson. Forms:
//   {"item_id": "i9", "text": "Some text ..."}                 (rule 2, then rule 1)
//   {"item_id": "i9", "tokens": [["tok", 2], ["other", 1]]}    (rule 1)
//   {"item_id": 9, "simhash": 1234567890123}                   (the fingerprint itself)
//   {"item_id": "i9", "simhash": "00000000499602d2"}            (16 hex digits)
// Contract:
// - The payload must be well-formed UTF-8 and no string of it may escape a lone
//   surrogate (a \uD800..\uDBFF escape not followed by a \uDC00..\uDFFF one,
//   or the latter alone), else kBadUtf8 with DecodedItem::bad_utf8_offset = the
//   byte offset of the first ill-formed sequence, or of the backslash of the
//   lone surrogate's escape. It outranks every other reason.
// - The payload must be exactly one valid JSON object (RFC 8259, nesting within
//   simdjson's limit), else kNotJson, which outranks every other reason but
//   kBadUtf8. Fields in any order, other fields ignored; duplicate keys: the
//   first wins.
// - item_id: a string (unescaped) or an integer, used as its decimal text exactly
//   as written (like exposure events, docs/EVENTS.md). Absent, null or another
//   type: kMissingItem; "": kEmptyItem; longer than contentdb::kMaxContentItemBytes
//   (1024) bytes: kItemTooLong.
// - Content: each of text, tokens and simhash that is present and not null must
//   be well formed: text a string (else kBadText); tokens an array of [token,
//   weight] pairs, token a string and weight a whole number 0 .. 2^32 - 1 (2 and
//   2.0 alike; else kBadTokens); simhash an integer 0 .. 2^64 - 1 or a string of
//   exactly 16 hex digits, either case (else kBadSimhash). Of those present,
//   simhash is used, else tokens, else text. None present (or all null):
//   kMissingContent. Text without a word token, an empty tokens list, or tokens
//   whose weights are all 0: kNoTokens (their fingerprint would be 0 and every
//   such item would be a near-duplicate of every other).
// - Ranking: bad_utf8, not_json, then the item ID's reasons, then bad_simhash,
//   bad_tokens, bad_text, missing_content, no_tokens.
// - The fingerprint uses seed 0 (CONTENT.md rule 1, the default seed).
// Not thread-safe: one ItemDecoder per thread (it holds buffers and ICU's iterator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace ef {

// Stable names (ItemRejectReasonName) are metric labels and log words.
enum class ItemRejectReason {
  kNone = 0,
  kNotJson,         // not_json
  kMissingItem,     // missing_item
  kEmptyItem,       // empty_item
  kItemTooLong,     // item_too_long
  kMissingContent,  // missing_content
  kBadText,         // bad_text
  kBadTokens,       // bad_tokens
  kBadSimhash,      // bad_simhash
  kNoTokens,        // no_tokens
  kBadUtf8,         // bad_utf8
  kCount_,
};

// "not_json", ...; "none" for kNone and "unknown" for anything out of range.
const char* ItemRejectReasonName(ItemRejectReason r);

enum class ItemContentForm { kText, kTokens, kSimhash };

struct DecodedItem {
  std::string_view item_id;  // valid until the next Decode on the same decoder
  uint64_t simhash = 0;
  ItemContentForm form = ItemContentForm::kSimhash;  // which field gave the fingerprint
  // For kBadUtf8: the byte offset in the payload (see the contract above).
  size_t bad_utf8_offset = 0;
};

class ItemDecoder {
 public:
  ItemDecoder();
  ~ItemDecoder();
  ItemDecoder(const ItemDecoder&) = delete;
  ItemDecoder& operator=(const ItemDecoder&) = delete;

  // Decodes one payload (need not be padded; copied in). kNone and *out filled,
  // or a reject reason and *out unspecified (but bad_utf8_offset for kBadUtf8).
  ItemRejectReason Decode(const char* data, size_t len, DecodedItem* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ef
