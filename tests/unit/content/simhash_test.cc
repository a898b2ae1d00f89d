// docs/CONTENT.md: the fingerprint (rule 1) against the document's vector tables,
// read out of the document, and an independent in-test Simhash written from rule
// 1's text (bit by bit, +w / -w); the tokenizer (rule 2): normalisation, case
// folding, Chinese word segmentation, term frequency, invalid UTF-8.
#include "content/simhash.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "content/tokenizer.h"

namespace ef::content {
namespace {

using Row = std::vector<std::string>;

// The body rows of the first table after `marker` in docs/CONTENT.md.
std::vector<Row> Table(const std::string& marker) {
  std::ifstream in(std::string(EF_SOURCE_DIR) + "/docs/CONTENT.md");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t from = doc.find(marker);
  REQUIRE(from != std::string::npos);
  std::istringstream section(doc.substr(from));
  std::vector<Row> rows;
  bool body = false;
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("|", 0) != 0) {
      if (body) break;
      continue;
    }
    if (line.rfind("|--", 0) == 0) {
      body = true;
      continue;
    }
    if (!body) continue;
    Row cells;
    std::istringstream cs(line.substr(1));
    for (std::string c; std::getline(cs, c, '|');) {
      const size_t b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
    }
    rows.push_back(cells);
  }
  return rows;
}

// The quoted strings of a cell, in order: `"a"` ... -> a.
std::vector<std::string> Quoted(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t at = cell.find("`\""); at != std::string::npos; at = cell.find("`\"", at + 2)) {
    const size_t end = cell.find("\"`", at + 2);
    REQUIRE(end != std::string::npos);
    out.push_back(cell.substr(at + 2, end - at - 2));
    at = end;
  }
  return out;
}

uint64_t Hex(const std::string& cell) {
  const size_t at = cell.find("0x");
  REQUIRE(at != std::string::npos);
  return std::stoull(cell.substr(at), nullptr, 16);
}

// Rule 1 as written: for each bit, add w where the token's hash has a 1, subtract
// where it has a 0; 1 iff the sum is positive.
uint64_t Reference(const std::vector<WeightedToken>& tokens, uint64_t seed) {
  uint64_t fp = 0;
  for (int b = 0; b < 64; ++b) {
    int64_t v = 0;
    for (const auto& t : tokens)
      v += ((TokenHash(t.token, seed) >> b) & 1) ? int64_t{t.weight} : -int64_t{t.weight};
    if (v > 0) fp |= uint64_t{1} << b;
  }
  return fp;
}

TEST_CASE("content rule 1: XXH64 vectors of docs/CONTENT.md", "[content][contract]") {
  const auto rows = Table("XXH64 (seed `s`):");
  REQUIRE(rows.size() == 7);
  for (const Row& r : rows) {
    std::string data;
    if (r[0].rfind("bytes 0, 1, …, ", 0) == 0) {
      const int last = std::stoi(r[0].substr(std::string("bytes 0, 1, …, ").size()));
      for (int i = 0; i <= last; ++i) data.push_back(static_cast<char>(i));
    } else {
      data = Quoted(r[0]).at(0);
    }
    INFO(r[0]);
    CHECK(TokenHash(data, std::stoull(r[1])) == Hex(r[2]));
  }
}

TEST_CASE("content rule 1: fingerprint vectors of docs/CONTENT.md", "[content][contract]") {
  const auto rows = Table("Fingerprints (seed 0):");
  REQUIRE(rows.size() == 5);
  for (const Row& r : rows) {
    std::vector<WeightedToken> tokens;
    const std::vector<std::string> names = Quoted(r[0]);
    // `"a"`: 1, `"b"`: 2 -> weights after each ": ".
    size_t at = 0;
    for (const std::string& n : names) {
      at = r[0].find("\"`: ", r[0].find("`\"" + n + "\"`", at));
      REQUIRE(at != std::string::npos);
      tokens.push_back({n, static_cast<uint32_t>(std::stoul(r[0].substr(at + 4)))});
    }
    INFO(r[0]);
    CHECK(Simhash(tokens, 0) == Hex(r[1]));
    CHECK(Reference(tokens, 0) == Hex(r[1]));
  }
}

TEST_CASE("content rule 1: the fast sum equals the rule as written", "[content]") {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 300; ++round) {
    std::vector<WeightedToken> tokens(rng() % 40);
    for (auto& t : tokens) {
      t.token = "t" + std::to_string(rng() % 60);  // repeats on purpose
      t.weight = static_cast<uint32_t>(round % 3 == 0 ? rng() : rng() % 4);
    }
    const uint64_t seed = round % 2 ? rng() : 0;
    CHECK(Simhash(tokens, seed) == Reference(tokens, seed));
  }
  CHECK(HammingDistance(0, ~uint64_t{0}) == 64);
  CHECK(HammingDistance(0x5, 0x6) == 2);
}

std::vector<std::string> Names(const std::vector<WeightedToken>& t) {
  std::vector<std::string> out;
  for (const auto& x : t) out.push_back(x.token);
  return out;
}

TEST_CASE("content rule 2: the tokenizer folds width and case, counts terms, skips punctuation",
          "[content][tokenizer]") {
  Tokenizer tok;
  std::vector<WeightedToken> t;
  // Full-width letters and digits, upper case: one token with the plain form.
  REQUIRE(tok.Tokenize("\xEF\xBC\xA8\xEF\xBD\x85\xEF\xBD\x8C\xEF\xBD\x8C\xEF\xBD\x8F"  // Ｈｅｌｌｏ
                       " HELLO, hello! World 42 42.",
                       &t)
              .ok());
  REQUIRE(t.size() == 3);
  CHECK(t[0].token == "hello");
  CHECK(t[0].weight == 3);
  CHECK(t[1].token == "world");
  CHECK(t[1].weight == 1);
  CHECK(t[2].token == "42");
  CHECK(t[2].weight == 2);
  REQUIRE(tok.Tokenize("  ...  ", &t).ok());
  CHECK(t.empty());
  REQUIRE(tok.Tokenize("", &t).ok());
  CHECK(t.empty());
}

TEST_CASE("content rule 2: Chinese is split into words, not one token nor characters",
          "[content][tokenizer]") {
  Tokenizer tok;
  std::vector<WeightedToken> t;
  const std::string text = "我们喜欢看新闻，新闻很有意思。";
  REQUIRE(tok.Tokenize(text, &t).ok());
  const std::vector<std::string> names = Names(t);
  INFO(names.size());
  // Dictionary words: 新闻 ("news") is one token, seen twice; punctuation is not a token.
  bool news = false;
  for (const auto& w : t)
    if (w.token == "新闻") news = w.weight == 2;
  CHECK(news);
  size_t chars = 0, multi = 0;
  for (const std::string& n : names) {
    chars += n.size() / 3;  // CJK: 3 bytes each in UTF-8
    multi += n.size() > 3;
  }
  CHECK(multi >= 3);            // words of two or more characters
  CHECK(names.size() < chars);  // not one token per character
  CHECK(names.size() >= 4);     // nor one token for the sentence
  CHECK(std::find(names.begin(), names.end(), "，") == names.end());
  // Full-width and ASCII punctuation around Latin words in Chinese text.
  REQUIRE(tok.Tokenize("iPhone（新款）发布", &t).ok());
  CHECK(Names(t).front() == "iphone");
}

TEST_CASE("content rule 2: invalid UTF-8 is refused, naming the byte", "[content][tokenizer]") {
  Tokenizer tok;
  std::vector<WeightedToken> t;
  const Status st = tok.Tokenize(std::string("ok \xC3\x28 bad"), &t);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "text: invalid UTF-8 at byte 3");
  CHECK(tok.Tokenize(std::string("\xED\xA0\x80"), &t).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ef::content
