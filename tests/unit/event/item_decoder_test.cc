// ItemDecoder: the items topic's JSON forms (docs/CONTENT.md "Items topic"), both
// ID types, every reject reason, and the fingerprint each form gives.
#include "event/item_decoder.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "content/simhash.h"
#include "content/tokenizer.h"

namespace ef {
namespace {

struct Harness {
  ItemDecoder decoder;
  DecodedItem item;
  ItemRejectReason Decode(std::string_view payload) {
    return decoder.Decode(payload.data(), payload.size(), &item);
  }
};

uint64_t TextFingerprint(std::string_view text) {
  content::Tokenizer tokenizer;
  std::vector<content::WeightedToken> tokens;
  REQUIRE(tokenizer.Tokenize(text, &tokens).ok());
  return content::Simhash(tokens, 0);
}

TEST_CASE("item decoder: text, tokens and simhash forms give their fingerprints", "[item]") {
  Harness h;
  SECTION("text: rule 2 then rule 1") {
    REQUIRE(h.Decode(R"({"item_id": "i9", "text": "Hello, hello world!"})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.item_id == "i9");
    CHECK(h.item.form == ItemContentForm::kText);
    CHECK(h.item.simhash == TextFingerprint("Hello, hello world!"));
    CHECK(h.item.simhash == content::Simhash({{"hello", 2}, {"world", 1}}, 0));
  }
  SECTION("tokens: pairs of token and whole-number weight (2 and 2.0 alike)") {
    REQUIRE(
        h.Decode(R"({"item_id": "i9", "tokens": [["商品", 3], ["news", 2.0], ["hello", 1]]})") ==
        ItemRejectReason::kNone);
    CHECK(h.item.form == ItemContentForm::kTokens);
    // CONTENT.md's test vector.
    CHECK(h.item.simhash == 0x06452234909e0de9ull);
  }
  SECTION("simhash: an unsigned 64-bit integer") {
    REQUIRE(h.Decode(R"({"item_id": "i9", "simhash": 18446744073709551615})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.form == ItemContentForm::kSimhash);
    CHECK(h.item.simhash == UINT64_MAX);
    REQUIRE(h.Decode(R"({"item_id": "i9", "simhash": 0})") == ItemRejectReason::kNone);
    CHECK(h.item.simhash == 0);
  }
  SECTION("simhash: 16 hex digits, either case") {
    REQUIRE(h.Decode(R"({"item_id": "i9", "simhash": "06452234909E0de9"})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.simhash == 0x06452234909e0de9ull);
  }
  SECTION("simhash wins over tokens, tokens over text; null counts as absent") {
    REQUIRE(h.Decode(R"({"text": "a b", "tokens": [["x", 1]], "simhash": 7, "item_id": "i"})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.simhash == 7);
    REQUIRE(h.Decode(R"({"item_id": "i", "text": "hello", "tokens": [["x", 1]]})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.simhash == content::Simhash({{"x", 1}}, 0));
    REQUIRE(h.Decode(R"({"item_id": "i", "simhash": null, "tokens": null, "text": "hello"})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.form == ItemContentForm::kText);
    CHECK(h.item.simhash == TextFingerprint("hello"));
  }
}

TEST_CASE("item decoder: item IDs are strings or integers as written", "[item]") {
  Harness h;
  REQUIRE(h.Decode(R"({"item_id": 42, "simhash": 1})") == ItemRejectReason::kNone);
  CHECK(h.item.item_id == "42");
  REQUIRE(h.Decode(R"({"item_id": -7, "simhash": 1})") == ItemRejectReason::kNone);
  CHECK(h.item.item_id == "-7");
  REQUIRE(h.Decode(R"({"item_id": 123456789012345678901234567890, "simhash": 1})") ==
          ItemRejectReason::kNone);
  CHECK(h.item.item_id == "123456789012345678901234567890");
  REQUIRE(h.Decode(R"({"item_id": "caf\u00e9", "simhash": 1})") == ItemRejectReason::kNone);
  CHECK(h.item.item_id == "caf\xc3\xa9");
  SECTION("duplicate keys: the first wins; other fields are ignored") {
    REQUIRE(h.Decode(R"({"x": [1, {"y": null}], "item_id": "a", "item_id": "b", "simhash": 1})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.item_id == "a");
  }
  SECTION("the longest ID is 1024 bytes") {
    const std::string longest(1024, 'x');
    REQUIRE(h.Decode(R"({"item_id": ")" + longest + R"(", "simhash": 1})") ==
            ItemRejectReason::kNone);
    CHECK(h.item.item_id == longest);
  }
}

TEST_CASE("item decoder: every reject reason", "[item]") {
  Harness h;
  const std::vector<std::pair<std::string, ItemRejectReason>> cases = {
      {"", ItemRejectReason::kNotJson},
      {"not json", ItemRejectReason::kNotJson},
      {R"(["item_id", "i"])", ItemRejectReason::kNotJson},
      {R"({"item_id": "i", "simhash": 1)", ItemRejectReason::kNotJson},
      {R"({"item_id": "i", "simhash": 1}{})", ItemRejectReason::kNotJson},
      {R"({"item_id": "i", "simhash": 1, "other": [1 2]})", ItemRejectReason::kNotJson},
      {R"({"item_id": 1.5e, "simhash": 1})", ItemRejectReason::kNotJson},
      {"{\"item_id\": \"\xff\", \"simhash\": 1}", ItemRejectReason::kBadUtf8},
      {R"({"simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": null, "simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": 1.5, "simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": 2.0, "simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": true, "simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": ["i"], "simhash": 1})", ItemRejectReason::kMissingItem},
      {R"({"item_id": "", "simhash": 1})", ItemRejectReason::kEmptyItem},
      {R"({"item_id": ")" + std::string(1025, 'x') + R"(", "simhash": 1})",
       ItemRejectReason::kItemTooLong},
      {R"({"item_id": )" + std::string(1025, '7') + R"(, "simhash": 1})",
       ItemRejectReason::kItemTooLong},
      {R"({"item_id": "i"})", ItemRejectReason::kMissingContent},
      {R"({"item_id": "i", "text": null, "tokens": null, "simhash": null})",
       ItemRejectReason::kMissingContent},
      {R"({"item_id": "i", "text": 5})", ItemRejectReason::kBadText},
      {R"({"item_id": "i", "text": ["a"]})", ItemRejectReason::kBadText},
      {R"({"item_id": "i", "tokens": "a b"})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": {"a": 1}})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a"]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a", 1, 2]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [[1, 1]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a", -1]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a", 1.5]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a", 4294967296]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": [["a", "1"]]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "tokens": ["a"]})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "simhash": -1})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": 1.0})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": 18446744073709551616})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": "0x06452234909e0de"})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": "06452234909e0de"})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": "06452234909e0deg"})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "simhash": true})", ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "text": ""})", ItemRejectReason::kNoTokens},
      {R"({"item_id": "i", "text": " ... !? "})", ItemRejectReason::kNoTokens},
      {R"({"item_id": "i", "tokens": []})", ItemRejectReason::kNoTokens},
      {R"({"item_id": "i", "tokens": [["a", 0], ["b", 0]]})", ItemRejectReason::kNoTokens},
      {R"({"item_id": "i", "text": "\ud800"})", ItemRejectReason::kBadUtf8},
      // Ranking: bad_utf8 before not_json; the ID first, then simhash, tokens, text.
      {"{\"item_id\": \"\xff\", \"simhash\": 1", ItemRejectReason::kBadUtf8},
      {R"({"item_id": "i", "text": "\udc00", "simhash": 1)", ItemRejectReason::kBadUtf8},
      {R"({"item_id": "", "simhash": "x"})", ItemRejectReason::kEmptyItem},
      {R"({"item_id": "i", "simhash": "x", "tokens": 1, "text": 1})",
       ItemRejectReason::kBadSimhash},
      {R"({"item_id": "i", "tokens": 1, "text": 1})", ItemRejectReason::kBadTokens},
      {R"({"item_id": "i", "simhash": 5, "text": 1})", ItemRejectReason::kBadText},
  };
  for (const auto& [payload, want] : cases) {
    INFO(payload);
    CHECK(ItemRejectReasonName(h.Decode(payload)) == std::string(ItemRejectReasonName(want)));
  }
}

TEST_CASE("item decoder: reject reason names are stable", "[item]") {
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kNotJson)) == "not_json");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kMissingItem)) == "missing_item");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kEmptyItem)) == "empty_item");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kItemTooLong)) == "item_too_long");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kMissingContent)) == "missing_content");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kBadText)) == "bad_text");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kBadTokens)) == "bad_tokens");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kBadSimhash)) == "bad_simhash");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kNoTokens)) == "no_tokens");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kBadUtf8)) == "bad_utf8");
  CHECK(std::string(ItemRejectReasonName(ItemRejectReason::kCount_)) == "unknown");
}

// Issue 47: ill-formed UTF-8 and lone surrogates were counted as not_json, while
// CONTENT.md says such an item is refused naming the byte offset.
TEST_CASE("item decoder: ill-formed UTF-8 and lone surrogates are bad_utf8, with the offset",
          "[item]") {
  Harness h;
  struct Case {
    std::string payload;
    size_t offset;
  };
  const std::string head = R"({"item_id": "i", "text": "ab)";  // 28 bytes
  REQUIRE(head.size() == 28);
  const std::vector<Case> cases = {
      {head + "\xff\"}", 28},                          // not a UTF-8 byte
      {head + "\xc3\x28\"}", 28},                      // a lead byte without its continuation
      {head + "\xc0\xaf\"}", 28},                      // overlong '/'
      {head + "\xe0\x80\xaf\"}", 28},                  // overlong, 3 bytes
      {head + "\xed\xa0\x80\"}", 28},                  // a surrogate encoded in UTF-8
      {head + "\xf4\x90\x80\x80\"}", 28},              // above U+10FFFF
      {head + "\xe6\x96\"}", 28},                      // cut: the payload ends inside a character
      {head + "\u00e9\u65b0\xff\"}", 33},              // (é and 新: 2 and 3 bytes) before it
      {head + R"j(\ud800"})j", 28},                    // a high surrogate alone
      {head + R"j(\ud800x"})j", 28},                   // ... followed by a character
      {head + R"j(\ud800\u0041"})j", 28},              // ... followed by another escape
      {head + R"j(\udfff\ud800"})j", 28},              // a low one first
      {head + R"j(\ud83d\ude00\udc00"})j", 40},        // a pair (U+1F600), then a low one alone
      {R"({"item_id": "\ud800", "simhash": 1})", 13},  // in the item ID
      {R"({"other\udbff": 1, "item_id": "i", "simhash": 1})", 7},  // in a key
  };
  for (const Case& c : cases) {
    INFO(c.payload);
    h.item.bad_utf8_offset = 12345;
    CHECK(ItemRejectReasonName(h.Decode(c.payload)) == std::string("bad_utf8"));
    CHECK(h.item.bad_utf8_offset == c.offset);
  }
  // Not lone: escaped backslashes, a pair, and surrogate-like text; all decode.
  for (const std::string payload :
       {R"({"item_id": "i", "text": "a\\ud800 b"})",
        R"({"item_id": "i", "text": "\ud83d\ude00 x"})", R"({"item_id": "\\udc00", "simhash": 1})",
        R"({"item_id": "i", "text": "\"\\\"ud800"})"}) {
    INFO(payload);
    CHECK(ItemRejectReasonName(h.Decode(payload)) == std::string("none"));
  }
  // Bad JSON in valid UTF-8 stays not_json.
  CHECK(h.Decode(head + "\u00e9\"") == ItemRejectReason::kNotJson);
  CHECK(h.Decode(head + R"j(\x"})j") == ItemRejectReason::kNotJson);
}

TEST_CASE("item decoder: a bad message does not disturb the next one", "[item]") {
  Harness h;
  REQUIRE(h.Decode(R"({"item_id": "long-one", "text": "one two three four five six"})") ==
          ItemRejectReason::kNone);
  REQUIRE(h.Decode(R"({"item_id": "i", "tokens": [["a", 1.5]]})") == ItemRejectReason::kBadTokens);
  REQUIRE(h.Decode(R"({"item_id": "j", "text": "one two"})") == ItemRejectReason::kNone);
  CHECK(h.item.item_id == "j");
  CHECK(h.item.simhash == TextFingerprint("one two"));
}

}  // namespace
}  // namespace ef
