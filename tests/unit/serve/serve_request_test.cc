// `serve` request parsing/validation and response building (src/serve/request.h).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "serve/request.h"

namespace ef::serve {
namespace {

using nlohmann::json;

using Items = std::vector<std::string_view>;

// The parser is kept with its queries: their items are views into it.
struct Outcome {
  bool ok = false;
  std::unique_ptr<RequestParser> parser = std::make_unique<RequestParser>();
  ParsedQuery query;
  ParseError error;
};

Outcome Filter(const std::string& body, Limits limits = {}) {
  Outcome o;
  o.ok = o.parser->ParseFilter(body, limits, &o.query, &o.error);
  return o;
}

struct BatchOutcome {
  bool ok = false;
  std::unique_ptr<RequestParser> parser = std::make_unique<RequestParser>();
  std::vector<ParsedQuery> queries;
  ParseError error;
};

BatchOutcome Batch(const std::string& body, Limits limits = {}) {
  BatchOutcome o;
  o.ok = o.parser->ParseBatch(body, limits, &o.queries, &o.error);
  return o;
}

// The error of a body that must be rejected with `status`.
std::string FilterError(const std::string& body, int status = 400, Limits limits = {}) {
  Outcome o = Filter(body, limits);
  INFO(body);
  REQUIRE_FALSE(o.ok);
  CHECK(o.error.status == status);
  CHECK(o.error.message.find('\n') == std::string::npos);
  return o.error.message;
}

std::string BatchError(const std::string& body, int status = 400, Limits limits = {}) {
  BatchOutcome o = Batch(body, limits);
  INFO(body);
  REQUIRE_FALSE(o.ok);
  CHECK(o.error.status == status);
  return o.error.message;
}

}  // namespace

TEST_CASE("serve request: a filter body gives the user and items in order", "[serve]") {
  Outcome o = Filter(R"({"user_id": "u1", "items": ["i3", "i1", "i3", ""], "extra": {"x": 1}})");
  REQUIRE(o.ok);
  CHECK(o.query.user == "u1");
  CHECK(o.query.items == Items{"i3", "i1", "i3", ""});
  CHECK(o.query.integer_items.empty());

  Outcome empty = Filter(R"({"items": [], "user_id": "u2"})");
  REQUIRE(empty.ok);
  CHECK(empty.query.user == "u2");
  CHECK(empty.query.items.empty());
}

TEST_CASE("serve request: integer IDs are their decimal text, like the daemon's events",
          "[serve]") {
  Outcome o =
      Filter(R"({"user_id": 42, "items": [7, "7", -3, 18446744073709551615, "a\u00e9\n"]})");
  REQUIRE(o.ok);
  CHECK(o.query.user == "42");
  CHECK(o.query.items == Items{"7", "7", "-3", "18446744073709551615", "a\xc3\xa9\n"});
  CHECK(o.query.IsInteger(0));
  CHECK_FALSE(o.query.IsInteger(1));
  CHECK(o.query.IsInteger(2));
  CHECK(o.query.IsInteger(3));
  CHECK_FALSE(o.query.IsInteger(4));
}

TEST_CASE("serve request: escaped key names and the first of duplicate keys", "[serve]") {
  Outcome o = Filter(R"({"user\u005fid": "u1", "items": ["a"], "items": ["b"]})");
  REQUIRE(o.ok);
  CHECK(o.query.user == "u1");
  CHECK(o.query.items == Items{"a"});
}

TEST_CASE("serve request: every kind of bad filter body is a 400 naming the problem", "[serve]") {
  CHECK_THAT(FilterError(""), Catch::Contains("not valid JSON") && Catch::Contains("empty body"));
  CHECK_THAT(FilterError("user_id=u1"), Catch::StartsWith("body is not valid JSON"));
  CHECK_THAT(FilterError(R"({"user_id": "u1", "items": ["a",]})"),
             Catch::StartsWith("body is not valid JSON"));
  CHECK_THAT(FilterError(R"({"user_id": "u1"} trailing)"),
             Catch::StartsWith("body is not valid JSON"));
  // A raw control character in a string is invalid JSON: a body without a
  // backslash has no item that needs escapes (ParsedQuery::no_escapes).
  CHECK_THAT(FilterError("{\"user_id\": \"u\", \"items\": [\"a\x01\"]}"),
             Catch::StartsWith("body is not valid JSON"));
  CHECK_THAT(FilterError("{\"user_id\": \"u\", \"items\": [\"a\x1f\"]}"),
             Catch::StartsWith("body is not valid JSON"));
  const Outcome plain = Filter(R"({"user_id": "u", "items": ["a", 7]})");
  REQUIRE(plain.ok);
  CHECK(plain.query.no_escapes);
  const Outcome escaped = Filter(R"({"user_id": "u", "items": ["a\/"]})");
  REQUIRE(escaped.ok);
  CHECK_FALSE(escaped.query.no_escapes);
  CHECK_THAT(FilterError("{\"user_id\": \"u\xff\", \"items\": []}"),
             Catch::StartsWith("body is not valid JSON"));
  CHECK_THAT(FilterError(R"({"user_id": 1, "items": [123456789012345678901234567890]})"),
             Catch::Contains("64 bits"));
  CHECK(FilterError(R"(["u1", ["a"]])") == "body must be a JSON object, got an array");
  CHECK(FilterError(R"("u1")") == "body must be a JSON object, got a string");
  CHECK(FilterError(R"({"items": ["a"]})") == "user_id: missing");
  CHECK(FilterError(R"({"user": "u1", "items": ["a"]})") == "user_id: missing");
  CHECK(FilterError(R"({"user_id": null, "items": []})") ==
        "user_id: expected a string or an integer, got null");
  CHECK(FilterError(R"({"user_id": 1.5, "items": []})") ==
        "user_id: expected a string or an integer, got a number with a fraction or an exponent");
  CHECK(FilterError(R"({"user_id": ["u1"], "items": []})") ==
        "user_id: expected a string or an integer, got an array");
  CHECK_THAT(FilterError(R"({"user_id": "", "items": []})"),
             Catch::StartsWith("user_id: ") && Catch::Contains("must not be empty"));
  CHECK_THAT(FilterError(R"({"user_id": "}u1", "items": []})"),
             Catch::StartsWith("user_id: ") && Catch::Contains("starts with '}'"));
  CHECK(FilterError(R"({"user_id": "u1"})") == "items: missing");
  CHECK(FilterError(R"({"user_id": "u1", "items": "a"})") ==
        "items: expected an array of strings or integers, got a string");
  CHECK(FilterError(R"({"user_id": "u1", "items": {"a": 1}})") ==
        "items: expected an array of strings or integers, got an object");
  CHECK(FilterError(R"({"user_id": "u1", "items": null})") ==
        "items: expected an array of strings or integers, got null");
  CHECK(FilterError(R"({"user_id": "u1", "items": ["a", true]})") ==
        "items[1]: expected a string or an integer, got true");
  CHECK(FilterError(R"({"user_id": "u1", "items": ["a", "b", 2e3]})") ==
        "items[2]: expected a string or an integer, got a number with a fraction or an exponent");
  CHECK(FilterError(R"({"user_id": "u1", "items": [["a"]]})") ==
        "items[0]: expected a string or an integer, got an array");
}

TEST_CASE("serve request: body and item limits are 413s, at the limit is accepted", "[serve]") {
  Limits limits;
  limits.max_items = 3;
  limits.max_body_bytes = 1024;
  CHECK(Filter(R"({"user_id": "u", "items": ["a", "b", "c"]})", limits).ok);
  CHECK(FilterError(R"({"user_id": "u", "items": ["a", "b", "c", "d"]})", 413, limits) ==
        "4 items in the body, more than serve.max_items (3)");

  std::string body = R"({"user_id": "u", "items": ["a"], "pad": ")";
  body += std::string(1024 - body.size() - 2, 'x') + "\"}";
  REQUIRE(body.size() == 1024);
  CHECK(Filter(body, limits).ok);
  const std::string over = body.substr(0, body.size() - 2) + "x\"}";
  CHECK(FilterError(over, 413, limits) ==
        "body of 1025 bytes, more than serve.max_body_bytes (1024)");
  // The size limit is checked before the body is parsed.
  CHECK(FilterError(std::string(2000, '{'), 413, limits).find("serve.max_body_bytes") !=
        std::string::npos);
}

TEST_CASE("serve request: a batch body gives its queries in order", "[serve]") {
  BatchOutcome o = Batch(
      R"({"requests": [{"user_id": "u1", "items": ["a", "b"]}, {"user_id": 9, "items": [1]},
                       {"user_id": "u3", "items": []}]})");
  REQUIRE(o.ok);
  REQUIRE(o.queries.size() == 3);
  CHECK(o.queries[0].user == "u1");
  CHECK(o.queries[0].items == Items{"a", "b"});
  CHECK(o.queries[1].user == "9");
  CHECK(o.queries[1].items == Items{"1"});
  CHECK(o.queries[1].IsInteger(0));
  CHECK(o.queries[2].items.empty());

  BatchOutcome none = Batch(R"({"requests": []})");
  REQUIRE(none.ok);
  CHECK(none.queries.empty());
}

TEST_CASE("serve request: bad batch bodies name the request and the item", "[serve]") {
  CHECK_THAT(BatchError("[1"), Catch::StartsWith("body is not valid JSON"));
  CHECK(BatchError("[]") == "body must be a JSON object, got an array");
  CHECK(BatchError(R"({"user_id": "u1", "items": []})") == "requests: missing");
  CHECK(BatchError(R"({"requests": {"user_id": "u1"}})") ==
        "requests: expected an array of {\"user_id\", \"items\"} objects, got an object");
  CHECK(BatchError(R"({"requests": [{"user_id": "u1", "items": []}, "u2"]})") ==
        "requests[1]: expected an object, got a string");
  CHECK(BatchError(R"({"requests": [{"user_id": "u1", "items": []}, {"items": []}]})") ==
        "requests[1].user_id: missing");
  CHECK_THAT(BatchError(R"({"requests": [{"user_id": "}x", "items": []}]})"),
             Catch::StartsWith("requests[0].user_id: ") && Catch::Contains("'}'"));
  CHECK(BatchError(R"({"requests": [{"user_id": "u1"}]})") == "requests[0].items: missing");
  CHECK(BatchError(R"({"requests": [{"user_id": "u1", "items": ["a", false]}]})") ==
        "requests[0].items[1]: expected a string or an integer, got false");
}

TEST_CASE("serve request: a batch's items count together against max_items", "[serve]") {
  Limits limits;
  limits.max_items = 3;
  CHECK(Batch(R"({"requests": [{"user_id": "a", "items": ["1", "2"]},
                               {"user_id": "b", "items": ["3"]}]})",
              limits)
            .ok);
  CHECK(BatchError(R"({"requests": [{"user_id": "a", "items": ["1", "2"]},
                                    {"user_id": "b", "items": ["3", "4"]}]})",
                   413, limits) == "4 items in the body, more than serve.max_items (3)");
  CHECK(BatchError(R"({"requests": [{"user_id": "a", "items": []}, {"user_id": "b", "items": []},
                                    {"user_id": "c", "items": []}, {"user_id": "d", "items": []}]})",
                   413, limits) == "4 requests in the batch, more than serve.max_items (3)");
}

TEST_CASE("serve request: one parser is reused across bodies", "[serve]") {
  RequestParser parser;
  ParsedQuery q;
  ParseError e;
  REQUIRE(parser.ParseFilter(R"({"user_id": 1, "items": [1, 2, 3]})", {}, &q, &e));
  REQUIRE(parser.ParseFilter(R"({"user_id": "x", "items": ["y"]})", {}, &q, &e));
  CHECK(q.user == "x");
  CHECK(q.items == Items{"y"});
  CHECK(q.integer_items.empty());
  CHECK_FALSE(parser.ParseFilter("{", {}, &q, &e));
  REQUIRE(parser.ParseFilter(R"({"user_id": "z", "items": []})", {}, &q, &e));
  CHECK(q.user == "z");
}

TEST_CASE("serve response: unseen items in input order, typed as they came", "[serve]") {
  Outcome o = Filter(R"({"user_id": "u", "items": ["a", 7, "b\"q", "c", 8, "\u0001\\"]})");
  REQUIRE(o.ok);
  std::vector<bool> seen = {false, false, true, true, false, false};
  const std::string body = FilterResponse(o.query, Answer{&seen, false});
  json j = json::parse(body);
  CHECK(j == json::parse(R"({"unseen": ["a", 7, 8, "\u0001\\"], "seen_count": 2})"));
  CHECK_FALSE(j.contains("failed_open"));

  std::vector<bool> none(6, false);
  json open = json::parse(FilterResponse(o.query, Answer{&none, true}));
  CHECK(open["failed_open"] == true);
  CHECK(open["seen_count"] == 0);
  CHECK(open["unseen"].size() == 6);
  CHECK(open["unseen"][2] == "b\"q");
}

TEST_CASE("serve response: batch results in request order", "[serve]") {
  BatchOutcome o = Batch(R"({"requests": [{"user_id": "u1", "items": ["a", "b"]},
                                          {"user_id": "u2", "items": []},
                                          {"user_id": "u3", "items": [1, 2]}]})");
  REQUIRE(o.ok);
  std::vector<bool> s1 = {true, false}, s2 = {}, s3 = {false, true};
  json j = json::parse(
      BatchResponse(o.queries, {Answer{&s1, false}, Answer{&s2, false}, Answer{&s3, false}}));
  CHECK(j == json::parse(R"({"results": [{"unseen": ["b"], "seen_count": 1},
                                         {"unseen": [], "seen_count": 0},
                                         {"unseen": [1], "seen_count": 1}]})"));
  CHECK(json::parse(BatchResponse({}, {})) == json::parse(R"({"results": []})"));
}

TEST_CASE("serve response: error bodies and JSON strings are valid JSON", "[serve]") {
  const std::string message = "items[1]: \"x\"\tbad\x01\\ \xc3\xa9";
  json j = json::parse(ErrorResponse(message));
  CHECK(j["error"] == message);
  std::string out;
  AppendJsonString("a\"b\\c\n\x1f\x7f", &out);
  CHECK(out == "\"a\\\"b\\\\c\\n\\u001f\x7f\"");
}

// The answer is written branch-free (each item written, kept only if unseen):
// every item length around the short-copy cases, strings and integers mixed,
// random seen patterns, with and without an item that needs escapes.
TEST_CASE("serve response: unseen items of every length and pattern read back", "[serve]") {
  std::mt19937_64 rng(11);
  for (int round = 0; round < 400; ++round) {
    const size_t n = rng() % 40;
    std::vector<std::string> texts(n);
    ParsedQuery q;
    std::vector<bool> seen(n);
    json expected_unseen = json::array();
    size_t seen_count = 0;
    const bool with_escape = round % 4 == 3;
    for (size_t i = 0; i < n; ++i) {
      const bool integer = rng() % 3 == 0;
      if (integer) {
        texts[i] = std::to_string(rng() % 1'000'000'000'000ULL);
      } else {
        texts[i].assign(rng() % 34, 'a');
        for (char& c : texts[i]) c = static_cast<char>('0' + rng() % 75);  // '0'..'z': no escapes
        if (texts[i].find('\\') != std::string::npos) texts[i].assign("backslash-free");
        if (with_escape && i == n / 2) texts[i] += "\"\n\x01";
      }
      q.items.push_back(texts[i]);
      if (integer) {
        q.integer_items.resize(n, false);
        q.integer_items[i] = true;
      }
      seen[i] = rng() % 10 < 3;
      seen_count += seen[i];
      if (!seen[i]) {
        if (integer) {
          expected_unseen.push_back(std::stoull(texts[i]));
        } else {
          expected_unseen.push_back(texts[i]);
        }
      }
    }
    const bool failed_open = round % 5 == 0;
    const std::string body = FilterResponse(q, Answer{&seen, failed_open});
    INFO("round " << round << ": " << body);
    json expected = {{"unseen", expected_unseen}, {"seen_count", seen_count}};
    if (failed_open) expected["failed_open"] = true;
    REQUIRE(json::parse(body) == expected);
  }
}

// End to end through the parser: bodies with and without backslashes (so
// no_escapes set or not), integers in several queries of a batch (their text
// shares one buffer of the parser), answers checked against nlohmann's reading
// of the body.
TEST_CASE("serve response: parsed bodies answer with their own items", "[serve]") {
  std::mt19937_64 rng(12);
  RequestParser parser;  // reused across bodies, as serve's threads do
  for (int round = 0; round < 200; ++round) {
    const bool with_escape = round % 3 == 2;
    json request = {{"requests", json::array()}};
    const size_t users = 1 + rng() % 4;
    for (size_t u = 0; u < users; ++u) {
      json items = json::array();
      const size_t n = rng() % 30;
      for (size_t i = 0; i < n; ++i) {
        if (rng() % 3 == 0) {
          items.push_back(static_cast<int64_t>(rng() % 2'000'000'000'000ULL) - 1'000'000'000'000LL);
        } else {
          std::string t(rng() % 20, 'x');
          for (char& c : t) c = static_cast<char>('a' + rng() % 26);
          if (with_escape && i == n / 2) t += "\"\\\t";
          items.push_back(t);
        }
      }
      request["requests"].push_back({{"user_id", "u" + std::to_string(u)}, {"items", items}});
    }
    const std::string body = request.dump();
    INFO("round " << round << ": " << body);
    std::vector<ParsedQuery> queries;
    ParseError error;
    REQUIRE(parser.ParseBatch(body, {}, &queries, &error));
    REQUIRE(queries.size() == users);
    std::vector<std::vector<bool>> seen(users);
    std::vector<Answer> answers;
    json expected = {{"results", json::array()}};
    for (size_t u = 0; u < users; ++u) {
      const json& items = request["requests"][u]["items"];
      CHECK(queries[u].no_escapes == (body.find('\\') == std::string::npos));
      json unseen = json::array();
      size_t seen_count = 0;
      for (const json& item : items) {
        const bool s = rng() % 10 < 3;
        seen[u].push_back(s);
        seen_count += s;
        if (!s) unseen.push_back(item);
      }
      answers.push_back(Answer{&seen[u], false});
      expected["results"].push_back({{"unseen", unseen}, {"seen_count", seen_count}});
    }
    REQUIRE(json::parse(BatchResponse(queries, answers)) == expected);
    // The first query alone, as POST /v1/filter.
    ParsedQuery one;
    REQUIRE(parser.ParseFilter(request["requests"][0].dump(), {}, &one, &error));
    REQUIRE(json::parse(FilterResponse(one, answers[0])) == expected["results"][0]);
  }
}

// AppendJsonString checks eight bytes at a time: every length around a word and
// each byte kind at each position (escaped ones, the bytes next to them, UTF-8)
// must read back as the string, and the FilterResponse answer likewise.
TEST_CASE("serve response: a JSON string reads back for every length and byte position",
          "[serve]") {
  const std::string kinds = std::string("\"\\\n\r\t\x01\x1f\x20\x21\x5b\x5d\x7f\x80\xff", 14);
  for (size_t len = 1; len <= 20; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (const char k : kinds) {
        std::string s(len, 'x');
        s[at] = k;
        std::string out;
        AppendJsonString(s, &out);
        INFO("length " << len << ", byte " << int(static_cast<unsigned char>(k)) << " at " << at);
        const bool utf8 = static_cast<unsigned char>(k) < 0x80;
        if (utf8) {  // a lone byte >= 0x80 is not UTF-8: compare the bytes instead
          REQUIRE(json::parse(out) == s);
        } else {
          REQUIRE(out == "\"" + s + "\"");
        }
        ParsedQuery q;
        q.items = {s, "plain"};
        const std::vector<bool> seen = {false, true};
        const std::string response = FilterResponse(q, Answer{&seen, false});
        REQUIRE(response == "{\"unseen\":[" + out + "],\"seen_count\":1}");
      }
    }
  }
}

}  // namespace ef::serve

namespace ef::serve {

// Issue 30: paged feeds.
TEST_CASE("serve request: mark_served is true, false or a non-negative integer", "[serve]") {
  CHECK(Filter(R"({"user_id": "u", "items": ["a"]})").query.mark_served == 0);
  CHECK(Filter(R"({"user_id": "u", "items": ["a"], "mark_served": false})").query.mark_served == 0);
  CHECK(Filter(R"({"user_id": "u", "items": ["a"], "mark_served": 0})").query.mark_served == 0);
  CHECK(Filter(R"({"user_id": "u", "items": ["a"], "mark_served": true})").query.mark_served ==
        SIZE_MAX);
  CHECK(Filter(R"({"user_id": "u", "items": ["a"], "mark_served": 10})").query.mark_served == 10);
  CHECK(Filter(R"({"mark_served": 18446744073709551615, "user_id": "u", "items": []})")
            .query.mark_served == SIZE_MAX);
  const std::string expected = "mark_served: expected true, false or a non-negative integer, got ";
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": "yes"})") ==
        expected + "\"yes\"");
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": -1})") == expected + "-1");
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": 1.5})") == expected + "1.5");
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": null})") ==
        expected + "null");
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": {"n": 1}})") ==
        expected + "{\"n\":1}");
  CHECK(FilterError(R"({"user_id": "u", "items": ["a"], "mark_served": [1]})") == expected + "[1]");
  // A long value is cut.
  const std::string long_value(100, 'x');
  CHECK_THAT(FilterError(R"({"user_id": "u", "items": [], "mark_served": ")" + long_value + "\"}"),
             Catch::EndsWith("...") && !Catch::Contains(long_value));
  // The fields before it are checked first.
  CHECK(FilterError(R"({"user_id": "u", "items": [null], "mark_served": "yes"})") ==
        "items[0]: expected a string or an integer, got null");
}

TEST_CASE("serve request: a batch refuses marking, naming the request", "[serve]") {
  CHECK(BatchError(R"({"requests": [{"user_id": "u", "items": []},
                                    {"user_id": "v", "items": ["a"], "mark_served": 3}]})") ==
        "requests[1].mark_served: not supported in a batch; use /v1/filter");
  CHECK(BatchError(R"({"requests": [{"user_id": "u", "items": [], "mark_served": "x"}]})") ==
        "requests[0].mark_served: expected true, false or a non-negative integer, got \"x\"");
  BatchOutcome o = Batch(R"({"requests": [{"user_id": "u", "items": ["a"], "mark_served": false},
                             {"user_id": "v", "items": ["a"], "mark_served": 0}]})");
  CHECK(o.ok);
}

TEST_CASE("serve request: a served body is a filter body of at most serve.served_items items",
          "[serve]") {
  RequestParser parser;
  ParsedQuery q;
  ParseError e;
  Limits limits;
  limits.served_items = 3;
  REQUIRE(parser.ParseServed(R"({"user_id": 7, "items": ["a", 2, "c"]})", limits, &q, &e));
  CHECK(q.user == "7");
  CHECK(q.items == Items{"a", "2", "c"});
  REQUIRE_FALSE(
      parser.ParseServed(R"({"user_id": "u", "items": ["a", "b", "c", "d"]})", limits, &q, &e));
  CHECK(e.status == 400);
  CHECK(
      e.message ==
      "items: 4 items, more than serve.served_items (3): the served ring keeps only the newest 3");
  REQUIRE_FALSE(parser.ParseServed(R"({"user_id": "u", "items": [true]})", limits, &q, &e));
  CHECK(e.status == 400);
  CHECK(e.message == "items[0]: expected a string or an integer, got true");
  REQUIRE_FALSE(parser.ParseServed(R"({"items": []})", limits, &q, &e));
  CHECK(e.message == "user_id: missing");
  CHECK(ServedResponse(3, 120, false) == R"({"marked":3,"filled":120})");
  CHECK(ServedResponse(0, 0, true) == R"({"marked":0,"failed_open":true})");
}

TEST_CASE("serve response: served items are left out of unseen and listed apart", "[serve]") {
  Outcome o = Filter(R"({"user_id": "u", "items": ["a", 7, "b\"q", "c", 8, "d"]})");
  REQUIRE(o.ok);
  const std::vector<bool> seen = {false, false, true, false, false, false};
  const std::vector<bool> served = {false, true, false, true, false, false};
  Answer answer{&seen, false, &served, 2};
  CHECK(json::parse(FilterResponse(o.query, answer)) ==
        json::parse(R"({"unseen": ["a", 8, "d"], "seen_count": 1,
                        "served": [7, "c"], "served_count": 2})"));
  // With marking: "served" and "marked" always; mark_failed when set.
  answer.marking = true;
  answer.marked = 2;
  CHECK(json::parse(FilterResponse(o.query, answer)) ==
        json::parse(R"({"unseen": ["a", 8, "d"], "seen_count": 1,
                        "served": [7, "c"], "served_count": 2, "marked": 2})"));
  const std::vector<bool> none(6, false);
  Answer plain{&seen, false, &none, 0};
  CHECK(FilterResponse(o.query, plain) ==
        R"({"unseen":["a",7,"c",8,"d"],"seen_count":1})");  // as before issue 30
  plain.marking = true;
  plain.mark_failed = true;
  CHECK(FilterResponse(o.query, plain) ==
        R"({"unseen":["a",7,"c",8,"d"],"seen_count":1,"served":[],"served_count":0,)"
        R"("marked":0,"mark_failed":true})");
  // Marks written after the answer (serve.mark_queue): "mark_queued": true.
  plain.mark_failed = false;
  plain.marked = 3;
  plain.mark_queued = true;
  CHECK(FilterResponse(o.query, plain) ==
        R"({"unseen":["a",7,"c",8,"d"],"seen_count":1,"served":[],"served_count":0,)"
        R"("marked":3,"mark_queued":true})");
  // Escapes in served items (the slow path) too.
  Outcome esc = Filter(R"({"user_id": "u", "items": ["x\n", "y\"", 5]})");
  REQUIRE(esc.ok);
  const std::vector<bool> s3 = {false, false, false}, v3 = {true, true, true};
  Answer all_served{&s3, false, &v3, 3};
  CHECK(json::parse(FilterResponse(esc.query, all_served)) ==
        json::parse(R"({"unseen": [], "seen_count": 0, "served": ["x\n", "y\"", 5],
                        "served_count": 3})"));
}

TEST_CASE("serve request: clusters are one per item, strings, integers or null", "[serve]") {
  Outcome o = Filter(R"({"user_id": "u", "items": ["a", 7, "b"], "clusters": ["ca", 70, null]})");
  REQUIRE(o.ok);
  CHECK(o.query.clusters == Items{"ca", "70", ""});
  Outcome none = Filter(R"({"user_id": "u", "items": ["a"]})");
  REQUIRE(none.ok);
  CHECK(none.query.clusters.empty());
  Outcome empty = Filter(R"({"user_id": "u", "items": [], "clusters": []})");
  REQUIRE(empty.ok);
  CHECK(empty.query.clusters.empty());
  BatchOutcome b = Batch(
      R"({"requests": [{"user_id": "u", "items": ["a"], "clusters": ["x"]},
                       {"user_id": "v", "items": ["b"]}]})");
  REQUIRE(b.ok);
  CHECK(b.queries[0].clusters == Items{"x"});
  CHECK(b.queries[1].clusters.empty());
}

TEST_CASE("serve request: bad clusters are a 400 naming the field and entry", "[serve]") {
  struct Case {
    std::string body, message;
  };
  const std::vector<Case> cases = {
      {R"({"user_id": "u", "items": ["a"], "clusters": "x"})",
       "clusters: expected an array of strings, integers or null (one per item), got a string"},
      {R"({"user_id": "u", "items": ["a", "b"], "clusters": ["x"]})",
       "clusters: 1 entries for 2 items (one per item, null when unknown)"},
      {R"({"user_id": "u", "items": ["a", "b"], "clusters": ["x", true]})",
       "clusters[1]: expected a string, an integer or null, got true"},
      {R"({"user_id": "u", "items": ["a"], "clusters": [1.5]})",
       "clusters[0]: expected a string, an integer or null, got a number with a fraction or an "
       "exponent"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    Outcome o = Filter(c.body);
    CHECK_FALSE(o.ok);
    CHECK(o.error.status == 400);
    CHECK(o.error.message == c.message);
  }
  BatchOutcome b = Batch(
      R"({"requests": [{"user_id": "u", "items": ["a"]},
                       {"user_id": "v", "items": ["b"], "clusters": [["x"]]}]})");
  CHECK_FALSE(b.ok);
  CHECK(b.error.status == 400);
  CHECK(b.error.message ==
        "requests[1].clusters[0]: expected a string, an integer or null, got an array");
}

TEST_CASE("serve response: near duplicates are left out of unseen and listed with their cluster",
          "[serve]") {
  Outcome o = Filter(R"({"user_id": "u", "items": ["a", 7, "b", "c", 8]})");
  REQUIRE(o.ok);
  const std::vector<bool> seen = {true, false, false, false, false};
  const std::vector<bool> served = {false, false, false, true, false};
  const std::vector<bool> near = {false, true, true, false, false};
  const std::vector<std::string> clusters = {"", "70", "q\"x", "", ""};
  Answer answer{&seen, false, &served, 1};
  answer.near_duplicate = &near;
  answer.near_duplicate_count = 2;
  answer.clusters = &clusters;
  CHECK(json::parse(FilterResponse(o.query, answer)) ==
        json::parse(R"({"unseen": [8], "seen_count": 1, "served": ["c"], "served_count": 1,
                        "near_duplicates": [{"item": 7, "cluster": "70"},
                                            {"item": "b", "cluster": "q\"x"}],
                        "near_duplicate_count": 2})"));
  // No near duplicate: the answer is what it was.
  const std::vector<bool> none(5, false);
  Answer plain{&seen, false, &none, 0};
  plain.near_duplicate = &none;
  plain.clusters = &clusters;
  CHECK(FilterResponse(o.query, plain) == R"({"unseen":[7,"b","c",8],"seen_count":1})");
}

TEST_CASE("serve response: random seen and served patterns match a plain model", "[serve]") {
  std::mt19937_64 rng(30);
  for (int round = 0; round < 300; ++round) {
    const size_t n = rng() % 40;
    json items = json::array();
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 4 == 0) {
        items.push_back(static_cast<int64_t>(rng() % 100000) - 50000);
      } else {
        std::string s(rng() % 20, 'a');
        for (char& c : s) c = static_cast<char>('a' + rng() % 26);
        if (round % 2 == 0 && rng() % 10 == 0) s += "\"\\";  // odd rounds: no escapes
        items.push_back(s);
      }
    }
    Outcome o = Filter(json{{"user_id", "u"}, {"items", items}}.dump());
    REQUIRE(o.ok);
    std::vector<bool> seen(n), served(n);
    json unseen = json::array(), served_list = json::array();
    size_t seen_count = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto r = rng() % 3;
      seen[i] = r == 0;
      served[i] = r == 1;
      seen_count += seen[i];
      if (r == 1) served_list.push_back(items[i]);
      if (r == 2) unseen.push_back(items[i]);
    }
    Answer answer{&seen, false, &served, served_list.size()};
    json expected = {{"unseen", unseen}, {"seen_count", seen_count}};
    if (!served_list.empty()) {
      expected["served"] = served_list;
      expected["served_count"] = served_list.size();
    }
    INFO(o.query.items.size());
    REQUIRE(json::parse(FilterResponse(o.query, answer)) == expected);
  }
}

}  // namespace ef::serve
