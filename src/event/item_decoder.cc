#include "event/item_decoder.h"

#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "content/simhash.h"
#include "content/tokenizer.h"
#include "event/json_scan.h"

namespace ef {
namespace {

namespace od = simdjson::ondemand;
using json::TrimRight;

// contentdb::kMaxContentItemBytes (a room above this one; the pipeline checks
// that the two agree).
constexpr size_t kMaxItemIdBytes = 1024;
constexpr uint64_t kMaxWeight = 0xFFFFFFFFull;

enum Slot : int { kSlotNone = -1, kSlotItem = 0, kSlotText, kSlotTokens, kSlotSimhash, kSlotCount };
constexpr const char* kNames[kSlotCount] = {"item_id", "text", "tokens", "simhash"};

bool Hex4(std::string_view s, size_t at, uint32_t* out) {
  if (at > s.size() || s.size() - at < 4) return false;
  uint32_t v = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return false;
    v = v * 16 + static_cast<uint32_t>(d);
  }
  *out = v;
  return true;
}

// The byte offset of the backslash of the first \u escape of a lone surrogate in
// a string of the JSON text `s` (read lexically), or npos.
size_t LoneSurrogateAt(std::string_view s) {
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      in_string = !in_string;
      continue;
    }
    if (!in_string || c != '\\') continue;
    uint32_t u = 0;
    if (i + 1 >= s.size() || s[i + 1] != 'u' || !Hex4(s, i + 2, &u)) {
      ++i;  // another escape (or a bad one: not_json's)
      continue;
    }
    if (u >= 0xDC00 && u <= 0xDFFF) return i;  // a low half alone
    if (u >= 0xD800 && u <= 0xDBFF) {
      uint32_t low = 0;
      if (i + 7 < s.size() && s[i + 6] == '\\' && s[i + 7] == 'u' && Hex4(s, i + 8, &low) &&
          low >= 0xDC00 && low <= 0xDFFF) {
        i += 11;  // the pair
        continue;
      }
      return i;  // a high half alone
    }
    i += 5;
  }
  return std::string_view::npos;
}

// What Decode's pass over the fields found, per slot; the first occurrence of a
// key counts.
struct ItemFields {
  bool seen[kSlotCount] = {false, false, false, false};
  bool present[kSlotCount] = {false, false, false, false};  // seen and not null
  ItemRejectReason reason[kSlotCount] = {ItemRejectReason::kMissingItem, ItemRejectReason::kNone,
                                         ItemRejectReason::kNone, ItemRejectReason::kNone};
  std::string text;
  uint64_t simhash = 0;
};

Slot SlotOf(std::string_view key) {
  Slot slot = kSlotNone;
  for (int s = 0; s < kSlotCount; ++s)
    if (key == kNames[s]) slot = static_cast<Slot>(s);
  return slot;
}

}  // namespace

const char* ItemRejectReasonName(ItemRejectReason r) {
  switch (r) {
    case ItemRejectReason::kNone:
      return "none";
    case ItemRejectReason::kNotJson:
      return "not_json";
    case ItemRejectReason::kMissingItem:
      return "missing_item";
    case ItemRejectReason::kEmptyItem:
      return "empty_item";
    case ItemRejectReason::kItemTooLong:
      return "item_too_long";
    case ItemRejectReason::kMissingContent:
      return "missing_content";
    case ItemRejectReason::kBadText:
      return "bad_text";
    case ItemRejectReason::kBadTokens:
      return "bad_tokens";
    case ItemRejectReason::kBadSimhash:
      return "bad_simhash";
    case ItemRejectReason::kNoTokens:
      return "no_tokens";
    case ItemRejectReason::kBadUtf8:
      return "bad_utf8";
    default:
      return "unknown";
  }
}

struct ItemDecoder::Impl {
  // Two on-demand passes: the first walks the whole document (Validate), so
  // that not_json means exactly "not one valid JSON object" and outranks every
  // other reason; the second reads the fields of a document known to be valid,
  // with number tokens as written (integer IDs keep their text; simdjson's DOM
  // would refuse integers of more than 64 bits).
  od::parser parser;
  od::document doc;
  std::string buf;  // the payload, then SIMDJSON_PADDING zero bytes
  std::string id;   // the item ID's bytes (a copy: views die with the next iterate)
  std::vector<content::WeightedToken> tokens;
  content::Tokenizer tokenizer;

  bool ValidDocument(size_t len);
  ItemRejectReason ReadId(od::value& v);
  ItemRejectReason ReadTokens(od::value& v);
  static ItemRejectReason ReadSimhash(od::value& v, uint64_t* out);
  ItemRejectReason Decode(const char* data, size_t len, DecodedItem* out);
  // Decode's steps. Why a payload ValidDocument refused was refused: bad_utf8
  // (with *out's offset) or not_json.
  static ItemRejectReason RefusedReason(std::string_view payload, DecodedItem* out);
  // Every field of the valid document into *fields; not_json stops the pass.
  ItemRejectReason ReadFields(size_t len, ItemFields* fields);
  // One known field's value into its slot (not_json if it cannot be read).
  ItemRejectReason ReadField(Slot slot, od::value& value, ItemFields* fields);
  // The item from its fields: the first reason in precedence order, else the
  // simhash given, or computed from the tokens or the text.
  ItemRejectReason Conclude(const ItemFields& fields, DecodedItem* out);
};

bool ItemDecoder::Impl::ValidDocument(size_t len) {
  if (parser.iterate(buf.data(), len, buf.size()).get(doc) != simdjson::SUCCESS) return false;
  od::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return false;
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field) != simdjson::SUCCESS) return false;
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return false;
    if (!json::Validate(field.value(), 2, buf.data() + len)) return false;
  }
  // Trailing content ("{...}{...}"): the document's location is out of bounds
  // exactly at its end (simdjson 3.0 has no at_end()).
  return doc.current_location().error() == simdjson::OUT_OF_BOUNDS;
}

ItemRejectReason ItemDecoder::Impl::ReadId(od::value& v) {
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return ItemRejectReason::kNotJson;
  if (token[0] == '"') {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
    id.assign(s);
  } else if (token[0] == '-' || (token[0] >= '0' && token[0] <= '9')) {
    if (!json::SplitNumber(token).is_integer) return ItemRejectReason::kMissingItem;
    id.assign(token);  // the decimal text as written: 42 and "42" are one ID
  } else {
    return ItemRejectReason::kMissingItem;  // true, false, null, object, array
  }
  if (id.empty()) return ItemRejectReason::kEmptyItem;
  if (id.size() > kMaxItemIdBytes) return ItemRejectReason::kItemTooLong;
  return ItemRejectReason::kNone;
}

ItemRejectReason ItemDecoder::Impl::ReadTokens(od::value& v) {
  tokens.clear();
  od::array list;
  if (v.get_array().get(list) != simdjson::SUCCESS) return ItemRejectReason::kBadTokens;
  for (auto element : list) {
    od::array pair;
    if (element.get_array().get(pair) != simdjson::SUCCESS) return ItemRejectReason::kBadTokens;
    content::WeightedToken wt;
    int n = 0;
    for (auto part : pair) {
      od::value value;
      if (std::move(part).get(value) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
      if (n == 0) {
        std::string_view s;
        if (value.get_string().get(s) != simdjson::SUCCESS) return ItemRejectReason::kBadTokens;
        wt.token.assign(s);
      } else if (n == 1) {
        const std::string_view t = TrimRight(value.raw_json_token());
        if (t.empty() || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')))
          return ItemRejectReason::kBadTokens;
        double w = 0;
        if (value.get_double().get(w) != simdjson::SUCCESS || !(w >= 0) ||
            w > static_cast<double>(kMaxWeight) || std::floor(w) != w)
          return ItemRejectReason::kBadTokens;
        wt.weight = static_cast<uint32_t>(w);
      }
      ++n;
    }
    if (n != 2) return ItemRejectReason::kBadTokens;
    tokens.push_back(std::move(wt));
  }
  return ItemRejectReason::kNone;
}

ItemRejectReason ItemDecoder::Impl::ReadSimhash(od::value& v, uint64_t* out) {
  const std::string_view token = TrimRight(v.raw_json_token());
  if (token.empty()) return ItemRejectReason::kNotJson;
  if (token[0] == '"') {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
    return json::ParseHex64(s, out) ? ItemRejectReason::kNone : ItemRejectReason::kBadSimhash;
  }
  // Negative, fraction, exponent, more than 64 bits, other types (the document
  // is valid JSON: ValidDocument).
  return json::ParseUint64(token, out) ? ItemRejectReason::kNone : ItemRejectReason::kBadSimhash;
}

ItemRejectReason ItemDecoder::Impl::Decode(const char* data, size_t len, DecodedItem* out) {
  if (data == nullptr) len = 0;
  buf.assign(data == nullptr ? "" : data, len);
  buf.append(simdjson::SIMDJSON_PADDING, '\0');
  if (!ValidDocument(len)) return RefusedReason(std::string_view(buf.data(), len), out);
  ItemFields fields;
  if (ItemRejectReason r = ReadFields(len, &fields); r != ItemRejectReason::kNone) return r;
  return Conclude(fields, out);
}

ItemRejectReason ItemDecoder::Impl::RefusedReason(std::string_view payload, DecodedItem* out) {
  // simdjson refuses ill-formed UTF-8 and lone surrogates as it refuses bad
  // JSON; only a payload it refused is looked at again.
  size_t at = content::InvalidUtf8Offset(payload);
  if (at == std::string_view::npos) at = LoneSurrogateAt(payload);
  if (at == std::string_view::npos) return ItemRejectReason::kNotJson;
  out->bad_utf8_offset = at;
  return ItemRejectReason::kBadUtf8;
}

ItemRejectReason ItemDecoder::Impl::ReadFields(size_t len, ItemFields* fields) {
  if (parser.iterate(buf.data(), len, buf.size()).get(doc) != simdjson::SUCCESS)
    return ItemRejectReason::kNotJson;
  od::object object;
  if (doc.get_object().get(object) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
  for (auto field_result : object) {
    od::field field;
    if (std::move(field_result).get(field) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
    std::string_view key;
    if (field.unescaped_key().get(key) != simdjson::SUCCESS) return ItemRejectReason::kNotJson;
    const Slot slot = SlotOf(key);
    if (slot == kSlotNone || fields->seen[slot]) continue;  // the first occurrence wins
    fields->seen[slot] = true;
    if (ReadField(slot, field.value(), fields) == ItemRejectReason::kNotJson)
      return ItemRejectReason::kNotJson;
    for (ItemRejectReason r : fields->reason)
      if (r == ItemRejectReason::kNotJson) return r;
  }
  return ItemRejectReason::kNone;
}

ItemRejectReason ItemDecoder::Impl::ReadField(Slot slot, od::value& value, ItemFields* fields) {
  const std::string_view token = TrimRight(value.raw_json_token());
  const bool is_null = token == "null";
  fields->present[slot] = !is_null;
  ItemRejectReason& reason = fields->reason[slot];
  if (slot == kSlotItem) {
    reason = ReadId(value);
    return ItemRejectReason::kNone;
  }
  if (is_null) return ItemRejectReason::kNone;
  switch (slot) {
    case kSlotText: {
      std::string_view s;
      if (token.empty() || token[0] != '"') {
        reason = ItemRejectReason::kBadText;
      } else if (value.get_string().get(s) != simdjson::SUCCESS) {
        return ItemRejectReason::kNotJson;
      } else {
        fields->text.assign(s);
      }
      break;
    }
    case kSlotTokens:
      reason = ReadTokens(value);
      break;
    case kSlotSimhash:
      reason = ReadSimhash(value, &fields->simhash);
      break;
    default:
      break;
  }
  return ItemRejectReason::kNone;
}

ItemRejectReason ItemDecoder::Impl::Conclude(const ItemFields& fields, DecodedItem* out) {
  if (fields.reason[kSlotItem] != ItemRejectReason::kNone) return fields.reason[kSlotItem];
  for (Slot s : {kSlotSimhash, kSlotTokens, kSlotText})
    if (fields.reason[s] != ItemRejectReason::kNone) return fields.reason[s];
  out->item_id = id;
  if (fields.present[kSlotSimhash]) {
    out->form = ItemContentForm::kSimhash;
    out->simhash = fields.simhash;
    return ItemRejectReason::kNone;
  }
  if (fields.present[kSlotTokens]) {
    out->form = ItemContentForm::kTokens;
  } else if (fields.present[kSlotText]) {
    out->form = ItemContentForm::kText;
    // simdjson checked the UTF-8, so the tokenizer's only refusal cannot happen.
    if (!tokenizer.Tokenize(fields.text, &tokens).ok()) return ItemRejectReason::kBadText;
  } else {
    return ItemRejectReason::kMissingContent;
  }
  bool any_weight = false;
  for (const auto& t : tokens) any_weight = any_weight || t.weight > 0;
  if (!any_weight) return ItemRejectReason::kNoTokens;
  out->simhash = content::Simhash(tokens, 0);
  return ItemRejectReason::kNone;
}

ItemDecoder::ItemDecoder() : impl_(std::make_unique<Impl>()) {}
ItemDecoder::~ItemDecoder() = default;

ItemRejectReason ItemDecoder::Decode(const char* data, size_t len, DecodedItem* out) {
  return impl_->Decode(data, len, out);
}

}  // namespace ef
