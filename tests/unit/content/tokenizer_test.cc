// docs/CONTENT.md rule 2: the tokenizer against the "Rule 2 vectors" table, read
// out of the document (text as a JSON string -> the exact tokens and weights), on
// the ICU version the document names; and the properties behind steps 3 and 4
// (issue 47): typographic quotes fold, and a line break between CJK characters,
// wherever it is, is no word boundary.
#include "content/tokenizer.h"

#include <unicode/uscript.h>
#include <unicode/uversion.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/doc_tables.h"

namespace ef::content {
namespace {

constexpr const char* kHeading = "### Rule 2 vectors";

// `"a"`: 1, `"b"`: 2 (or "(none)") -> "a:1 b:2 " (the same text as Render).
std::string DocTokens(const std::string& cell) {
  if (cell == "(none)") return "";
  std::string out;
  static const std::regex kToken("`\"([^`]*)\"`: ([0-9]+)");
  for (auto it = std::sregex_iterator(cell.begin(), cell.end(), kToken);
       it != std::sregex_iterator(); ++it)
    out += (*it)[1].str() + ":" + (*it)[2].str() + " ";
  REQUIRE(!out.empty());
  return out;
}

std::string Render(const std::vector<WeightedToken>& tokens) {
  std::string out;
  for (const WeightedToken& t : tokens) out += t.token + ":" + std::to_string(t.weight) + " ";
  return out;
}

std::string Tokens(Tokenizer& tok, const std::string& text) {
  std::vector<WeightedToken> t;
  const Status st = tok.Tokenize(text, &t);
  REQUIRE(st.ok());
  return Render(t);
}

}  // namespace

TEST_CASE("content rule 2: the vectors of docs/CONTENT.md, on the ICU version it names",
          "[content][tokenizer][contract]") {
  // "They hold for ICU 72": other versions may segment otherwise (their
  // dictionaries and Unicode data); the rows are to be derived again then.
  std::smatch m;
  const std::string section = test::DocSection("CONTENT.md", kHeading);
  REQUIRE(std::regex_search(section, m, std::regex("hold for ICU ([0-9]+)")));
  UVersionInfo icu;
  u_getVersion(icu);
  INFO("the vectors are for ICU " << m[1].str() << ", this is ICU " << int{icu[0]});
  REQUIRE(std::stoi(m[1].str()) == int{icu[0]});

  const auto rows = test::DocTableRows("CONTENT.md", kHeading);
  REQUIRE(rows.size() >= 14);
  Tokenizer tok;
  for (const test::DocRow& r : rows) {
    REQUIRE(r.size() == 2);
    REQUIRE(r[0].size() > 2);
    REQUIRE(r[0].front() == '`');
    REQUIRE(r[0].back() == '`');
    // The cell is a JSON string: its escapes (\n, \u2019, ...) as JSON reads them.
    const std::string text =
        nlohmann::json::parse(r[0].substr(1, r[0].size() - 2)).get<std::string>();
    INFO(r[0]);
    CHECK(Tokens(tok, text) == DocTokens(r[1]));
  }
}

TEST_CASE("content rule 2: typographic quotes, apostrophes and dashes are their ASCII forms",
          "[content][tokenizer]") {
  Tokenizer tok;
  const std::string ascii = "It's the \"best\" - isn't it? Rock'n'roll, 5'3\"-ish.";
  // Each mark of step 3, in place of its ASCII form (U+2033 stands for '').
  CHECK(Tokens(tok,
               "It\u2019s the \u201cbest\u201d \u2014 isn\u2018t it? "
               "Rock\u201bn\u2032roll, 5\uff073\u201e\u2010ish.") == Tokens(tok, ascii));
  CHECK(Tokens(tok,
               "It\u2019s the \u201fbest\u201d \u2212 isn\u2019t it? "
               "Rock\u2019n\u2019roll, 5'3\u201d\u2011ish.") == Tokens(tok, ascii));
  for (const char* dash :
       {"\u2010", "\u2012", "\u2013", "\u2014", "\u2015", "\u2212", "\ufe58", "\ufe63", "\uff0d"}) {
    INFO(dash);
    CHECK(Tokens(tok, std::string("well") + dash + "known") == Tokens(tok, "well-known"));
  }
  CHECK(Tokens(tok, "don\u2019t") == "don't:1 ");
  CHECK(Tokens(tok, "5\u20333") == Tokens(tok, "5''3"));  // ″ is ′′ after NFKC
  // Not folded: a modifier letter apostrophe is a letter (ʼokina-like use).
  CHECK(Tokens(tok, "don\u02bct") == "don\u02bct:1 ");
}

TEST_CASE("content rule 2: a line break between CJK characters is no word boundary, anywhere",
          "[content][tokenizer]") {
  Tokenizer tok;
  const std::vector<std::string> texts = {
      "我们喜欢看新闻，新闻很有意思。", "床前明月光疑是地上霜举头望明月低头思故乡",
      "東京都庁の展望室からコーヒーを飲みながら富士山を見ました",
      "\U00020000\U00020001\u4e2d\U0002A700文"};  // CJK extension B and C: surrogate pairs
  const std::vector<std::string> breaks = {"\n",     "\r\n",   " \n ", "\n\n", "\u3000\n",
                                           "\u2028", "\u2029", "\x0b", "\x0c", "\u0085"};
  for (const std::string& text : texts) {
    const std::string joined = Tokens(tok, text);
    // Split into code points; put each break between every two of them.
    std::vector<std::string> cps;
    for (size_t i = 0; i < text.size();) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      const size_t n = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      cps.push_back(text.substr(i, n));
      i += n;
    }
    for (const std::string& br : breaks)
      for (size_t at = 1; at < cps.size(); ++at) {
        std::string wrapped;
        for (size_t i = 0; i < cps.size(); ++i) wrapped += (i == at ? br : "") + cps[i];
        INFO(wrapped);
        CHECK(Tokens(tok, wrapped) == joined);
      }
  }
  // A long run of white space with line breaks: removed whole.
  CHECK(Tokens(tok, "新" + std::string(100000, '\n') + "闻") == "新闻:1 ");
}

// The tokenizer looks up no script below U+2E80 (a shortcut): right while no code
// point there has Han, Hiragana or Katakana in its Script_Extensions.
TEST_CASE("content rule 2: no CJK character (step 4) is below U+2E80", "[content][tokenizer]") {
  int below = 0, cjk = 0;
  for (UChar32 c = 0; c <= 0x10FFFF; ++c) {
    const bool is_cjk = uscript_hasScript(c, USCRIPT_HAN) ||
                        uscript_hasScript(c, USCRIPT_HIRAGANA) ||
                        uscript_hasScript(c, USCRIPT_KATAKANA);
    cjk += is_cjk;
    below += is_cjk && c < 0x2E80;
  }
  CHECK(below == 0);
  CHECK(cjk > 90000);  // not vacuous: the ideographs are there
}

TEST_CASE("content rule 2: other line breaks and white space stay word boundaries",
          "[content][tokenizer]") {
  Tokenizer tok;
  CHECK(Tokens(tok, "新 闻") == "新:1 闻:1 ");                 // no line break
  CHECK(Tokens(tok, "新\u3000闻") == "新:1 闻:1 ");            // (U+3000 is a space)
  CHECK(Tokens(tok, "新闻\nnews\n新闻") == "新闻:2 news:1 ");  // Latin on one side
  CHECK(Tokens(tok, "新闻\n42") == "新闻:1 42:1 ");            // a digit
  CHECK(Tokens(tok, "word\nword") == "word:2 ");               // not CJK
  CHECK(Tokens(tok, "안녕하세요\n반갑습니다") == "안녕하세요:1 반갑습니다:1 ");  // Hangul
  CHECK(Tokens(tok, "\n新闻\n") == "新闻:1 ");  // at the ends: nothing to join
}

}  // namespace ef::content
