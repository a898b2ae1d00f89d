// Issue 30, paged feeds, end to end: `exposure-filter serve` with "mark_served"
// and POST /v1/served, and `exposure-filter check --mark-served`, against a real
// redis-server (the served ring, docs/FORMAT.md rule 10, written by the client
// library's script), with exposures written by the daemon where a test needs
// seen items.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "bloom/served.h"
#include "common/clock.h"
#include "redis/meta.h"
#include "support/fault_stream.h"
#include "support/process.h"
#include "support/serve_client.h"
#include "support/stack.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Strings = std::vector<std::string>;

// Exposures of `user` to `items`, written by the daemon (run until committed).
void Expose(Stack& stack, const std::string& config, const std::string& user,
            const Strings& items) {
  stack.Produce({{user, items, SystemClock().NowMs()}});
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  CHECK(daemon->Stop(SIGTERM, 30s) == 0);
}

// The layout stored as the daemon's first write would store it: nothing seen.
void StoreLayout(Stack& stack) {
  auto conn = stack.redis().Connect();
  Layout effective;
  REQUIRE(EnsureMeta(*conn, DefaultTestLayout(), &effective).ok());
}

std::unique_ptr<httplib::Client> HttpClient(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);
  c->set_read_timeout(30, 0);
  return c;
}

struct Http {
  int status = -1;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

Http Post(httplib::Client& c, const std::string& path, const json& body) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  Http h;
  if (r) {
    h.status = r->status;
    h.body = r->body;
  }
  return h;
}

Http PostRaw(httplib::Client& c, const std::string& path, const std::string& body) {
  auto r = c.Post(path.c_str(), body, "application/json");
  Http h;
  if (r) {
    h.status = r->status;
    h.body = r->body;
  }
  return h;
}

// The "error" of a JSON error answer with `status`.
std::string ErrorOf(const Http& h, int status) {
  INFO("HTTP " << h.status << ": " << h.body);
  CHECK(h.status == status);
  const json j = h.Json();
  REQUIRE(j.is_object());
  REQUIRE(j.contains("error"));
  return j["error"].get<std::string>();
}

json Filter(const std::string& user, const Strings& items) {
  return json{{"user_id", user}, {"items", items}};
}

json Marking(const std::string& user, const Strings& items, const json& mark) {
  json j = Filter(user, items);
  j["mark_served"] = mark;
  return j;
}

Strings Field(const json& j, const char* name) {
  return j.contains(name) ? j.at(name).get<Strings>() : Strings{};
}

Strings First(const Strings& v, size_t n) {
  return Strings(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}

std::string Metrics(httplib::Client& c) {
  auto r = c.Get("/metrics");
  REQUIRE(r);
  return r->body;
}

int CountLines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

const std::string kPrefix = "ef:";  // the test config's filter.key_prefix

// A redis-server with the layout stored (nothing seen) and one serve on it,
// with `sets` overrides and a keep-alive HTTP client.
struct OneServe {
  Stack stack{1};
  std::string config = stack.WriteConfig();
  int port = FreePort();
  std::unique_ptr<Process> serve;
  std::unique_ptr<httplib::Client> http;

  OneServe(const Strings& sets, const std::string& log) {
    StoreLayout(stack);
    serve = StartServe(stack, config, port, sets, log);
    http = HttpClient(port);
  }
};

// Awaits serve's exposure_filter_serve_items_marked_total reaching n: the queued
// marks written (serve.mark_queue).
bool AwaitMarked(httplib::Client& c, double n) {
  return WaitFor(
      [&] {
        auto r = c.Get("/metrics");
        return r && SampleValue(r->body, "exposure_filter_serve_items_marked_total") >= n;
      },
      20s, 5ms);
}

}  // namespace

TEST_CASE(
    "serve: two pages with mark_served 10 share no item, the second names the first as served, "
    "and after serve.served_ttl they are candidates again",
    "[integration][serve][served]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  const std::string user = "pager";
  Strings pool;
  Strings seen_items;
  for (int i = 0; i < 40; ++i) {
    pool.push_back("cand-" + std::to_string(i));
    if (i % 8 == 3) seen_items.push_back(pool.back());  // 5 seen, spread over the pool
  }
  Expose(stack, config, user, seen_items);
  const int port = FreePort();
  auto serve = StartServe(stack, config, port, {"serve.served_ttl=1s"}, "pages.log");
  INFO("serve output:\n" << serve->Output());
  auto http = HttpClient(port);
  const std::set<std::string> seen_set(seen_items.begin(), seen_items.end());

  // Page 1: the first 10 unseen candidates are marked.
  const Http p1 = Post(*http, "/v1/filter", Marking(user, pool, 10));
  INFO("page 1: " << p1.body);
  REQUIRE(p1.status == 200);
  const json j1 = p1.Json();
  const Strings unseen1 = Field(j1, "unseen");
  CHECK(j1.at("seen_count") == 5);
  CHECK(j1.at("served_count") == 0);
  CHECK(j1.at("served") == json::array());
  CHECK(j1.at("marked") == 10);
  CHECK(j1.at("mark_queued") == true);  // written after the answer (serve.mark_queue)
  CHECK_FALSE(j1.contains("mark_failed"));
  CHECK(unseen1.size() == 35);
  const Strings page1 = First(unseen1, 10);
  for (const auto& item : unseen1) CHECK(seen_set.count(item) == 0);
  REQUIRE(AwaitMarked(*http, 10));

  // The ring: 16 + C * w bytes, C = serve.served_items (500), w for serve.served_fpr,
  // its TTL serve.served_ttl (1 s).
  const std::string key = ServedKey(kPrefix, user);
  const size_t ring_bytes = kServedHeaderBytes + 500 * ServedWidth(500, 0.0001);
  CHECK(stack.redis().Command({"STRLEN", key}).integer == static_cast<int64_t>(ring_bytes));
  const int64_t pttl = stack.redis().Command({"PTTL", key}).integer;
  CHECK(pttl > 0);
  CHECK(pttl <= 1000);

  // Page 2, no exposure event in between: no item of page 1; page 1 is "served".
  const Http p2 = Post(*http, "/v1/filter", Marking(user, pool, 10));
  INFO("page 2: " << p2.body);
  REQUIRE(p2.status == 200);
  const json j2 = p2.Json();
  const Strings unseen2 = Field(j2, "unseen");
  CHECK(Field(j2, "served") == page1);  // input order, as sent
  CHECK(j2.at("served_count") == 10);
  CHECK(j2.at("seen_count") == 5);
  CHECK(j2.at("marked") == 10);
  CHECK(unseen2.size() == 25);
  REQUIRE(AwaitMarked(*http, 20));
  const Strings page2 = First(unseen2, 10);
  for (const auto& item : page2) {
    CHECK(std::find(page1.begin(), page1.end(), item) == page1.end());
    CHECK(seen_set.count(item) == 0);
  }
  // Without marking, a read leaves both pages out too, and marks nothing.
  const Http plain = Post(*http, "/v1/filter", Filter(user, pool));
  REQUIRE(plain.status == 200);
  CHECK(plain.Json().at("served_count") == 20);
  CHECK_FALSE(plain.Json().contains("marked"));
  CHECK(Field(plain.Json(), "unseen") == Strings(unseen2.begin() + 10, unseen2.end()));

  // After the TTL the key is gone (awaited, not slept) and every unseen item is
  // a candidate again; the answer is the one before any mark.
  CHECK(WaitFor([&] { return stack.redis().Command({"EXISTS", key}).integer == 0; }, 10s, 20ms));
  const Http after = Post(*http, "/v1/filter", Filter(user, pool));
  REQUIRE(after.status == 200);
  CHECK(after.Json() ==
        json::parse(R"({"seen_count": 5, "unseen": )" + json(unseen1).dump() + "}"));

  const std::string m = Metrics(*http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_items_marked_total") == 20);
  CHECK(SampleValue(m, "exposure_filter_serve_candidates_served_total") == 30);  // 10 + 20
  CHECK(SampleValue(m, "exposure_filter_serve_mark_errors_total") == 0);
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: POST /v1/served marks items that /v1/filter then answers served, and a burst of "
    "10000 keeps the ring at 16 + C*w bytes with the newest served",
    "[integration][serve][served]") {
  OneServe one({}, "served.log");
  Stack& stack = one.stack;
  auto& serve = one.serve;
  auto& http = one.http;
  INFO("serve output:\n" << serve->Output());

  // Marked, then answered served (integer IDs as their text, echoed as integers).
  const Http marked = PostRaw(*http, "/v1/served", R"({"user_id": 42, "items": ["a", "b", 7]})");
  REQUIRE(marked.status == 200);
  CHECK(marked.Json() == json::parse(R"({"marked": 3, "filled": 3})"));
  const Http f = PostRaw(*http, "/v1/filter", R"({"user_id": "42", "items": ["x", 7, "b", "7"]})");
  REQUIRE(f.status == 200);
  CHECK(f.Json() == json::parse(R"({"unseen": ["x"], "seen_count": 0, "served": [7, "b", "7"],
                                    "served_count": 3})"));
  // An empty list marks nothing and costs no write.
  CHECK(Post(*http, "/v1/served", Filter("nobody", {})).Json() ==
        json::parse(R"({"marked": 0, "filled": 0})"));
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "nobody")}).integer == 0);

  // A burst: 10,000 items in 20 requests of serve.served_items (500).
  const std::string user = "burst";
  const std::string key = ServedKey(kPrefix, user);
  const uint32_t width = ServedWidth(500, 0.0001);
  const int64_t ring_bytes = static_cast<int64_t>(kServedHeaderBytes + 500 * width);
  auto item = [](int i) { return "burst-" + std::to_string(i); };
  for (int r = 0; r < 20; ++r) {
    Strings items;
    for (int i = r * 500; i < (r + 1) * 500; ++i) items.push_back(item(i));
    const Http h = Post(*http, "/v1/served", Filter(user, items));
    INFO("request " << r << ": " << h.body);
    REQUIRE(h.status == 200);
    CHECK(h.Json() == json({{"marked", 500}, {"filled", 500}}));
    CHECK(stack.redis().Command({"STRLEN", key}).integer == ring_bytes);
  }
  Strings newest, oldest;
  for (int i = 9500; i < 10000; ++i) newest.push_back(item(i));
  for (int i = 0; i < 500; ++i) oldest.push_back(item(i));
  const Http n = Post(*http, "/v1/filter", Filter(user, newest));
  REQUIRE(n.status == 200);
  CHECK(n.Json().at("served_count") == 500);
  CHECK(Field(n.Json(), "unseen").empty());
  const Http o = Post(*http, "/v1/filter", Filter(user, oldest));
  REQUIRE(o.status == 200);
  CHECK_FALSE(o.Json().contains("served"));  // overwritten (false positives: ~500 * 2^-24 each)
  CHECK(Field(o.Json(), "unseen") == oldest);
  CHECK(stack.redis().Command({"STRLEN", key}).integer == ring_bytes);

  // More than serve.served_items in one request: 400 naming items; nothing written.
  Strings too_many;
  for (int i = 0; i < 501; ++i) too_many.push_back("over-" + std::to_string(i));
  CHECK(ErrorOf(Post(*http, "/v1/served", Filter("over", too_many)), 400) ==
        "items: 501 items, more than serve.served_items (500): the served ring keeps only the "
        "newest 500");
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "over")}).integer == 0);

  const std::string m = Metrics(*http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_items_marked_total") == 10003);
  CHECK(SampleValue(m, "exposure_filter_serve_candidates_served_total") == 503);
  CHECK(SampleValue(m, "exposure_filter_serve_requests_total{code=\"200\",endpoint=\"served\"}") ==
        22);
  CHECK(SampleValue(m, "exposure_filter_serve_requests_total{code=\"400\",endpoint=\"served\"}") ==
        1);
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: a mark_served of the wrong type and bad /v1/served bodies are 400s naming the field",
    "[integration][serve][served]") {
  OneServe one({"serve.served_items=5"}, "bad.log");
  Stack& stack = one.stack;
  auto& serve = one.serve;
  auto& http = one.http;
  INFO("serve output:\n" << serve->Output());
  const std::string expected = "mark_served: expected true, false or a non-negative integer, got ";
  const std::vector<std::pair<json, std::string>> wrong = {{"yes", "\"yes\""},
                                                           {-1, "-1"},
                                                           {1.5, "1.5"},
                                                           {nullptr, "null"},
                                                           {json::object({{"n", 1}}), "{\"n\":1}"},
                                                           {json::array({3}), "[3]"}};
  for (const auto& [value, text] : wrong) {
    CHECK(ErrorOf(Post(*http, "/v1/filter", Marking("u", {"a"}, value)), 400) == expected + text);
  }
  // false and 0 mark nothing: the answer of a plain read.
  for (const json& none : {json(false), json(0)}) {
    const Http h = Post(*http, "/v1/filter", Marking("u", {"a"}, none));
    REQUIRE(h.status == 200);
    CHECK(h.Json() == json::parse(R"({"unseen": ["a"], "seen_count": 0})"));
  }
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "u")}).integer == 0);
  // A batch does not mark.
  json batch = {{"requests", {Filter("u", {"a"}), Marking("v", {"b"}, 2)}}};
  CHECK(ErrorOf(Post(*http, "/v1/filter:batch", batch), 400) ==
        "requests[1].mark_served: not supported in a batch; use /v1/filter");
  // /v1/served: the rules of /v1/filter for user_id and items, at most serve.served_items.
  CHECK(ErrorOf(PostRaw(*http, "/v1/served", R"({"items": ["a"]})"), 400) == "user_id: missing");
  CHECK(ErrorOf(PostRaw(*http, "/v1/served", R"({"user_id": 1.5, "items": []})"), 400) ==
        "user_id: expected a string or an integer, got a number with a fraction or an exponent");
  CHECK(ErrorOf(PostRaw(*http, "/v1/served", R"({"user_id": "u", "items": "a"})"), 400) ==
        "items: expected an array of strings or integers, got a string");
  CHECK(ErrorOf(PostRaw(*http, "/v1/served", R"({"user_id": "u", "items": ["a", false]})"), 400) ==
        "items[1]: expected a string or an integer, got false");
  CHECK_THAT(ErrorOf(PostRaw(*http, "/v1/served", R"({"user_id": "", "items": ["a"]})"), 400),
             Catch::StartsWith("user_id: "));
  CHECK_THAT(ErrorOf(Post(*http, "/v1/served", Filter("u", {"1", "2", "3", "4", "5", "6"})), 400),
             Catch::StartsWith("items: 6 items, more than serve.served_items (5)"));
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "u")}).integer == 0);
  // The wrong method is a 405 naming POST.
  auto get = http->Get("/v1/served");
  REQUIRE(get);
  CHECK(get->status == 405);
  CHECK(get->get_header_value("Allow") == "POST");
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE("serve: marking with Redis down fails open with a 200 or closed with a 503",
          "[integration][serve][served]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  StoreLayout(stack);
  const int open_port = FreePort(), closed_port = FreePort();
  auto open = StartServe(stack, config, open_port, {}, "open.log");
  auto closed = StartServe(stack, config, closed_port, {"serve.fail_closed=true"}, "closed.log");
  INFO("open:\n" << open->Output() << "\nclosed:\n" << closed->Output());
  auto open_http = HttpClient(open_port);
  auto closed_http = HttpClient(closed_port);
  for (auto* c : {open_http.get(), closed_http.get()})
    REQUIRE(Post(*c, "/v1/filter", Marking("u", {"a", "b"}, 1)).status == 200);

  stack.redis().Stop();
  // The read fails: every item unseen, nothing marked.
  const Http f = Post(*open_http, "/v1/filter", Marking("u", {"a", "b", "c"}, true));
  REQUIRE(f.status == 200);
  CHECK(f.Json() == json::parse(R"({"unseen": ["a", "b", "c"], "seen_count": 0, "served": [],
                                    "served_count": 0, "marked": 0, "failed_open": true})"));
  const Http s = Post(*open_http, "/v1/served", Filter("u", {"a"}));
  REQUIRE(s.status == 200);
  CHECK(s.Json() == json::parse(R"({"marked": 0, "failed_open": true})"));
  CHECK_THAT(ErrorOf(Post(*closed_http, "/v1/filter", Marking("u", {"a"}, true)), 503),
             Catch::Contains("redis"));
  CHECK_THAT(ErrorOf(Post(*closed_http, "/v1/served", Filter("u", {"a"})), 503),
             Catch::Contains("redis"));
  const std::string m = Metrics(*open_http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_mark_errors_total") == 1);  // /v1/served's
  CHECK(SampleValue(m, "exposure_filter_serve_failed_open_total") == 1);  // the read
  CHECK(WaitFor([&] { return CountLines(open->Output(), "served items not marked") == 1; }, 10s));
  CHECK(open->Stop(SIGTERM, 20s) == 0);
  CHECK(closed->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: NOPERM for the marking script fails the mark like other NOPERM errors, with one log "
    "line naming the command",
    "[integration][serve][served]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  StoreLayout(stack);
  // The default user (serve's) may read but not run scripts.
  REQUIRE(
      stack.redis()
          .Command({"ACL", "SETUSER", "default", "-evalsha", "-eval", "-evalsha_ro", "-eval_ro"})
          .str == "OK");
  const int open_port = FreePort(), closed_port = FreePort();
  // serve.mark_queue=0: marks written before answering (queued ones: the next
  // test case).
  auto open = StartServe(stack, config, open_port, {"serve.mark_queue=0"}, "open.log");
  auto closed = StartServe(stack, config, closed_port, {"serve.fail_closed=true"}, "closed.log");
  INFO("open:\n" << open->Output() << "\nclosed:\n" << closed->Output());
  auto open_http = HttpClient(open_port);
  auto closed_http = HttpClient(closed_port);

  // Fail open: the read stands, the marks do not ("mark_failed": true).
  for (int i = 0; i < 2; ++i) {
    const Http f = Post(*open_http, "/v1/filter", Marking("u", {"a", "b"}, 1));
    INFO(f.body);
    REQUIRE(f.status == 200);
    CHECK(f.Json() == json::parse(R"({"unseen": ["a", "b"], "seen_count": 0, "served": [],
                                      "served_count": 0, "marked": 0, "mark_failed": true})"));
  }
  const Http s = Post(*open_http, "/v1/served", Filter("u", {"a"}));
  REQUIRE(s.status == 200);
  CHECK(s.Json() == json::parse(R"({"marked": 0, "failed_open": true})"));
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "u")}).integer == 0);
  // One line (at most one per 10 s) naming NOPERM and the command.
  CHECK(WaitFor([&] { return CountLines(open->Output(), "NOPERM") >= 1; }, 10s));
  CHECK(CountLines(open->Output(), "NOPERM") == 1);
  CHECK(CountLines(open->Output(), "'evalsha'") == 1);
  const std::string m = Metrics(*open_http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_mark_errors_total") == 3);
  CHECK(SampleValue(m, "exposure_filter_serve_failed_open_total") == 0);  // the reads worked

  // Fail closed: 503 naming NOPERM, as for a read refused by the ACL.
  CHECK_THAT(ErrorOf(Post(*closed_http, "/v1/filter", Marking("u", {"a"}, 1)), 503),
             Catch::Contains("NOPERM") && Catch::Contains("evalsha"));
  CHECK_THAT(ErrorOf(Post(*closed_http, "/v1/served", Filter("u", {"a"})), 503),
             Catch::Contains("NOPERM"));
  // Without marking, reads are answered.
  CHECK(Post(*closed_http, "/v1/filter", Filter("u", {"a"})).status == 200);
  CHECK(open->Stop(SIGTERM, 20s) == 0);
  CHECK(closed->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: a queued mark that fails after its answer is counted and logged once and its user "
    "reads as unmarked",
    "[integration][serve][served]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  StoreLayout(stack);
  REQUIRE(
      stack.redis()
          .Command({"ACL", "SETUSER", "default", "-evalsha", "-eval", "-evalsha_ro", "-eval_ro"})
          .str == "OK");
  const int port = FreePort();
  auto serve = StartServe(stack, config, port, {}, "queued.log");
  INFO("serve output:\n" << serve->Output());
  auto http = HttpClient(port);
  for (int i = 0; i < 2; ++i) {
    const Http f = Post(*http, "/v1/filter", Marking("u", {"a", "b"}, 1));
    INFO(f.body);
    REQUIRE(f.status == 200);
    CHECK(f.Json() == json::parse(R"({"unseen": ["a", "b"], "seen_count": 0, "served": [],
                                      "served_count": 0, "marked": 1, "mark_queued": true})"));
  }
  auto errors = [&] {
    return SampleValue(Metrics(*http), "exposure_filter_serve_mark_errors_total");
  };
  CHECK(WaitFor([&] { return errors() == 2; }, 20s, 5ms));
  CHECK(WaitFor([&] { return CountLines(serve->Output(), "NOPERM") >= 1; }, 10s));
  CHECK(CountLines(serve->Output(), "NOPERM") == 1);
  CHECK(CountLines(serve->Output(), "counted in exposure_filter_serve_mark_errors_total") == 1);
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "u")}).integer == 0);
  const std::string m = Metrics(*http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_marks_queued_total") == 2);
  CHECK(SampleValue(m, "exposure_filter_serve_items_marked_total") == 0);
  CHECK(SampleValue(m, "exposure_filter_serve_failed_open_total") == 0);  // the reads worked
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: mark_served answers before its marks are written: a next page sent while Redis holds "
    "writes back repeats the page (the documented window) and once written the page is served",
    "[integration][serve][served]") {
  // A deadline longer than the pause: the held write waits, it does not fail.
  OneServe one({"serve.timeout=10s"}, "window.log");
  Stack& stack = one.stack;
  auto& serve = one.serve;
  auto& http = one.http;
  INFO("serve output:\n" << serve->Output());
  Strings pool;
  for (int i = 0; i < 20; ++i) pool.push_back("w-" + std::to_string(i));
  const std::string key = ServedKey(kPrefix, "racer");
  REQUIRE(Post(*http, "/v1/filter", Filter("racer", pool)).status == 200);  // connections made

  // Writes (the marking script) wait until the pause ends; reads are answered.
  REQUIRE(stack.redis().Command({"CLIENT", "PAUSE", "1500", "WRITE"}).str == "OK");
  const auto paused = std::chrono::steady_clock::now();
  const Http p1 = Post(*http, "/v1/filter", Marking("racer", pool, 5));
  const Http p2 = Post(*http, "/v1/filter", Marking("racer", pool, 5));
  const bool answered_in_pause = std::chrono::steady_clock::now() - paused < 1500ms;
  const bool key_in_pause = stack.redis().Command({"EXISTS", key}).integer == 1;
  INFO("page 1: " << p1.body << "\npage 2: " << p2.body);
  REQUIRE(p1.status == 200);
  REQUIRE(p2.status == 200);
  CHECK(answered_in_pause);  // not held by the write
  CHECK_FALSE(key_in_pause);
  CHECK(p1.Json().at("mark_queued") == true);
  // The race: page 2 did not see page 1's marks.
  CHECK(Field(p2.Json(), "unseen") == Field(p1.Json(), "unseen"));
  CHECK(p2.Json().at("served_count") == 0);

  REQUIRE(AwaitMarked(*http, 10));
  CHECK(std::chrono::steady_clock::now() - paused >= 1400ms);  // written after the pause
  const Http p3 = Post(*http, "/v1/filter", Marking("racer", pool, 5));
  REQUIRE(p3.status == 200);
  CHECK(Field(p3.Json(), "served") == First(pool, 5));
  CHECK(First(Field(p3.Json(), "unseen"), 5) == Strings(pool.begin() + 5, pool.begin() + 10));
  const std::string m = Metrics(*http);
  INFO(m);
  CHECK(SampleValue(m, "exposure_filter_serve_marks_queued_total") == 3);
  CHECK(SampleValue(m, "exposure_filter_serve_mark_delay_seconds_count") >= 2);
  CHECK(SampleValue(m, "exposure_filter_serve_mark_errors_total") == 0);
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
}

TEST_CASE(
    "serve: a full mark queue writes the request's marks before its answer and SIGTERM writes "
    "what is queued before exiting",
    "[integration][serve][served]") {
  OneServe one({"serve.timeout=10s", "serve.mark_queue=1"}, "full.log");
  Stack& stack = one.stack;
  auto& serve = one.serve;
  auto& http = one.http;
  INFO("serve output:\n" << serve->Output());
  REQUIRE(Post(*http, "/v1/filter", Filter("x", {"a"})).status == 200);

  REQUIRE(stack.redis().Command({"CLIENT", "PAUSE", "1500", "WRITE"}).str == "OK");
  // One plan in the writer's hands, one in the queue: of three requests at least
  // one finds the queue full and is answered only once its marks are written.
  int queued = 0, written_first = 0;
  for (int u = 0; u < 3; ++u) {
    const std::string user = "full-" + std::to_string(u);
    const Http h = Post(*http, "/v1/filter", Marking(user, {"a", "b", "c"}, 2));
    INFO(user << ": " << h.body);
    REQUIRE(h.status == 200);
    CHECK(h.Json().at("marked") == 2);
    if (h.Json().contains("mark_queued")) {
      ++queued;
    } else {
      ++written_first;
      CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, user)}).integer == 1);
    }
  }
  CHECK(written_first >= 1);
  CHECK(queued + written_first == 3);
  CHECK(SampleValue(Metrics(*http), "exposure_filter_serve_mark_queue_full_total") ==
        written_first);

  // Queued under a new pause, then SIGTERM: the marks are written before exit.
  REQUIRE(AwaitMarked(*http, 6));
  REQUIRE(stack.redis().Command({"CLIENT", "PAUSE", "1500", "WRITE"}).str == "OK");
  const Http last = Post(*http, "/v1/filter", Marking("last", {"a", "b"}, 2));
  REQUIRE(last.status == 200);
  CHECK(last.Json().at("mark_queued") == true);
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "last")}).integer == 0);
  CHECK(serve->Stop(SIGTERM, 20s) == 0);
  CHECK(stack.redis().Command({"EXISTS", ServedKey(kPrefix, "last")}).integer == 1);
}

TEST_CASE("check: with mark-served it marks the unseen items, and a second check shows them served",
          "[integration][cli][served]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig();
  Expose(stack, config, "carol", {"s1"});
  auto check = [&](Strings args) {
    Strings argv = {"check", "-c", config, "-u", "carol"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Ef(argv);
  };
  auto lines_of = [](const std::string& text) {
    Strings out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };

  // --page 2: the first two unseen items are marked.
  auto first = check({"--mark-served", "--page", "2", "i1", "s1", "i2", "i3"});
  INFO("stdout: " << first.out << "\nstderr: " << first.err);
  REQUIRE(first.code == 0);
  const Strings l1 = lines_of(first.out);
  REQUIRE(l1.size() == 4);
  CHECK(l1[0] == "unseen  i1  (marked served)");
  CHECK_THAT(l1[1], Catch::StartsWith("seen    s1  (bucket "));
  CHECK(l1[2] == "unseen  i2  (marked served)");
  CHECK(l1[3] == "unseen  i3");
  CHECK_THAT(first.err, Catch::Contains("1 of 4 item(s) seen by user carol, 0 served recently, "
                                        "2 marked served"));

  // A second check: i1 and i2 are served.
  auto second = check({"i1", "s1", "i2", "i3"});
  INFO("stdout: " << second.out << "\nstderr: " << second.err);
  REQUIRE(second.code == 0);
  const Strings l2 = lines_of(second.out);
  REQUIRE(l2.size() == 4);
  CHECK(l2[0] == "served  i1");
  CHECK_THAT(l2[1], Catch::StartsWith("seen    s1  (bucket "));
  CHECK(l2[2] == "served  i2");
  CHECK(l2[3] == "unseen  i3");
  auto js = check({"--json", "i1", "s1", "i2", "i3"});
  REQUIRE(js.code == 0);
  const json j = json::parse(js.out);
  CHECK(j.at("seen") == json::array({"s1"}));
  CHECK(j.at("served") == json::array({"i1", "i2"}));
  CHECK(j.at("unseen") == json::array({"i3"}));
  CHECK_FALSE(j.contains("marked"));
  CHECK(check({"--unseen", "i1", "s1", "i2", "i3"}).out == "i3\n");

  // The next page: --unseen prints what it marked.
  auto page = check({"--mark-served", "--page", "1", "--unseen", "i1", "s1", "i2", "i3", "i4"});
  REQUIRE(page.code == 0);
  CHECK(page.out == "i3\n");
  auto jm = check({"--mark-served", "--json", "i1", "i3", "i4", "i5"});
  REQUIRE(jm.code == 0);
  const json j2 = json::parse(jm.out);
  CHECK(j2.at("served") == json::array({"i1", "i3"}));
  CHECK(j2.at("marked") == json::array({"i4", "i5"}));
  CHECK(j2.at("unseen") == json::array({"i4", "i5"}));
  CHECK(check({"--unseen", "i1", "i2", "i3", "i4", "i5", "i6"}).out == "i6\n");

  // Usage: --page needs --mark-served, --mark-served is not for --at.
  auto page_alone = check({"--page", "2", "i1"});
  CHECK(page_alone.code == app::kExitUsage);
  CHECK_THAT(page_alone.err, Catch::Contains("--mark-served"));
  auto with_at = check({"--mark-served", "--at", "2h", "i1"});
  CHECK(with_at.code == app::kExitUsage);
  CHECK_THAT(with_at.err, Catch::Contains("--at"));
  auto zero = check({"--mark-served", "--page", "0", "i1"});
  CHECK(zero.code == app::kExitUsage);
  CHECK_THAT(zero.err, Catch::Contains("--page"));
  const std::string help = Ef({"check", "--help"}).out;
  CHECK_THAT(help, Catch::Contains("--mark-served") && Catch::Contains("--page"));
}

}  // namespace ef::test
