// Interop with an independent implementation of the bit-layout contract: the
// Python reference printed in docs/FORMAT.md (tests/interop/format_ref.py runs
// the document's own code block). What the daemon writes, the reference reads
// with the same answer for every item, false positives included; what the
// reference writes (into stages 0, 1 and 2), `exposure-filter check`, `serve`
// and the C++ reader read.
#include <httplib.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "read/bloom_reader.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/wait.h"

namespace ef::test {
namespace {

using namespace std::chrono_literals;

const std::string kRef = std::string(EF_SOURCE_DIR) + "/tests/interop/format_ref.py";

// "seen X" / "unseen X" lines -> item -> seen.
std::map<std::string, bool> ParseAnswers(const std::string& out) {
  std::map<std::string, bool> m;
  std::istringstream in(out);
  std::string word, item;
  while (in >> word >> item) m[item] = word == "seen";
  return m;
}

}  // namespace

TEST_CASE("interop: the daemon's bits read the same in the FORMAT.md Python reference",
          "[integration][interop]") {
  Stack stack(2);
  const int64_t now = SystemClock().NowMs();
  std::vector<TestEvent> events;
  // Two light users and one heavy one (several stages at items_per_bucket 40).
  for (int u = 0; u < 3; ++u) {
    const int items = u == 2 ? 400 : 30;
    for (int i = 0; i < items; i += 10) {
      TestEvent e;
      e.user = "iop-u" + std::to_string(u);
      e.ts_ms = now - 1000;
      for (int j = i; j < i + 10; ++j) e.items.push_back(e.user + "-i" + std::to_string(j));
      events.push_back(std::move(e));
    }
  }
  stack.Produce(events);
  auto daemon =
      stack.StartDaemon(stack.WriteConfig("ef.yaml", "filter:\n  items_per_bucket: 40\n"));
  REQUIRE(stack.AwaitCommitted(*daemon, 60s));
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  FilterConfig f;
  f.items_per_bucket = 40;
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  auto conn = stack.redis().Connect();
  BloomReader reader(*conn, *layout);
  std::map<std::string, std::vector<std::string>> by_user;
  for (const auto& e : events)
    by_user[e.user].insert(by_user[e.user].end(), e.items.begin(), e.items.end());
  size_t compared = 0, seen_both = 0;
  for (auto& [user, items] : by_user) {
    const size_t exposed = items.size();
    for (int j = 0; j < 2000; ++j) items.push_back(user + "-never-" + std::to_string(j));
    std::vector<std::string> argv = {"python3",
                                     kRef,
                                     "check",
                                     "--port",
                                     std::to_string(stack.redis().port()),
                                     "--user",
                                     user,
                                     "--now",
                                     std::to_string(now / 1000)};
    argv.insert(argv.end(), items.begin(), items.end());
    auto r = RunCommand(argv, "", true);
    INFO(r.out.substr(0, 2000));
    REQUIRE(r.code == 0);
    const auto py = ParseAnswers(r.out);
    REQUIRE(py.size() == items.size());
    auto cpp = reader.Check(user, items, now / 1000);
    REQUIRE(cpp.ok());
    for (size_t i = 0; i < items.size(); ++i) {
      INFO(user << " " << items[i]);
      CHECK(py.at(items[i]) == static_cast<bool>(cpp->seen[i]));
      if (i < exposed) CHECK(py.at(items[i]));  // zero false negatives
      seen_both += py.at(items[i]) && cpp->seen[i];
      ++compared;
    }
  }
  std::printf("interop: %zu answers compared (Python reference vs C++ reader), %zu seen\n",
              compared, seen_both);
  // The heavy user's key really holds later stages.
  const std::string heavy =
      MakeKey("ef:", "iop-u2", BucketStart((now - 1000) / 1000, 86400), 86400);
  CHECK(StagesPresent(layout->stage_table,
                      static_cast<size_t>(stack.redis().Command({"STRLEN", heavy}).integer)) >= 3);
}

TEST_CASE(
    "interop: bits the FORMAT.md Python reference writes, in stages 0-2, check and serve read",
    "[integration][interop]") {
  Stack stack(1);
  const std::string config = stack.WriteConfig("ef.yaml", "filter:\n  items_per_bucket: 40\n");
  // The meta, as a writer creates it.
  FilterConfig f;
  f.items_per_bucket = 40;
  auto layout = LayoutFromConfig(f);
  REQUIRE(layout.ok());
  std::vector<std::string> hset = {"HSET", "ef:meta"};
  for (const auto& [k, v] : layout->ToFields()) {
    hset.push_back(k);
    hset.push_back(v);
  }
  stack.redis().Command(hset);
  const int64_t now = SystemClock().NowMs();
  std::vector<std::string> written;
  for (int stage = 0; stage < 3; ++stage) {
    std::vector<std::string> argv = {"python3",
                                     kRef,
                                     "write",
                                     "--port",
                                     std::to_string(stack.redis().port()),
                                     "--user",
                                     "py-user",
                                     "--ts-ms",
                                     std::to_string(now - 5000),
                                     "--stage",
                                     std::to_string(stage)};
    for (int i = 0; i < 5; ++i) {
      written.push_back("py-s" + std::to_string(stage) + "-i" + std::to_string(i));
      argv.push_back(written.back());
    }
    auto r = RunCommand(argv, "", true);
    INFO(r.out);
    REQUIRE(r.code == 0);
  }
  std::vector<std::string> argv = {EF_BINARY, "check", "-c", config, "-u", "py-user", "--json"};
  argv.insert(argv.end(), written.begin(), written.end());
  argv.push_back("py-never-1");
  argv.push_back("py-never-2");
  auto r = RunCommand(argv, "", true);
  INFO(r.out);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::vector<std::string> seen = j.at("seen"), unseen = j.at("unseen");
  CHECK(seen == written);
  CHECK(unseen == std::vector<std::string>{"py-never-1", "py-never-2"});
  // And `serve` over HTTP: only the two never-written items come back unseen.
  const int port = FreePort();
  Process serve(
      {EF_BINARY, "serve", "-c", config, "--set", "serve.listen=127.0.0.1:" + std::to_string(port)},
      stack.dir().File("serve.log"));
  httplib::Client http("127.0.0.1", port);
  http.set_tcp_nodelay(true);
  REQUIRE(WaitFor(
      [&] {
        auto h = http.Get("/healthz");
        return !serve.Running() || (h && h->status == 200);
      },
      30s));
  INFO(serve.Output());
  REQUIRE(serve.Running());
  nlohmann::json body = {{"user_id", "py-user"}, {"items", written}};
  body["items"].push_back("py-never-1");
  body["items"].push_back("py-never-2");
  auto resp = http.Post("/v1/filter", body.dump(), "application/json");
  REQUIRE(resp);
  INFO(resp->body);
  REQUIRE(resp->status == 200);
  const auto answer = nlohmann::json::parse(resp->body);
  CHECK(answer.at("unseen") == nlohmann::json({"py-never-1", "py-never-2"}));
  CHECK(answer.at("seen_count") == written.size());
  CHECK(serve.Stop(SIGTERM, 30s) == 0);
  // And the C++ reader directly: 15 of 15 seen, the stages present.
  auto conn = stack.redis().Connect();
  BloomReader reader(*conn, *layout);
  auto res = reader.Check("py-user", written, now / 1000);
  REQUIRE(res.ok());
  for (size_t i = 0; i < written.size(); ++i) {
    INFO(written[i]);
    CHECK(res->seen[i]);
  }
}

}  // namespace ef::test
