// What the rollover tests (rollover_test.cc: v2 -> v3, rollover_v4_test.cc:
// v3 -> v4) share: a wall clock shifted to 50 s before an hour's end
// (EF_CLOCK_SHIFT_LIB), a redis-server on it, a Kafka stack, a daemon and `serve`
// on 1 h buckets, every event produced kept; light traffic through the switch;
// and the count of items a reader misses through the C++ reader, serve and
// FORMAT.md's Python reference.
#pragma once

#include <httplib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bloom/layout.h"
#include "read/bloom_reader.h"
#include "support/format_ref.h"
#include "support/process.h"
#include "support/redis_server.h"
#include "support/serve_client.h"
#include "support/shifted_clock.h"
#include "support/stack.h"

namespace ef::test {

struct RolloverRig {
  // `filter` (YAML lines under "filter:", indented two spaces) joins 1 h buckets,
  // a 1 d window and items_per_bucket 200.
  RolloverRig(const char* clock_lib, const std::string& filter)
      : clock(clock_lib, 50000),
        redis(StartRedisWithEnv(clock.env)),
        serve_port(FreePort()),
        config(stack.WriteConfig("ef.yaml",
                                 "filter:\n  bucket: 1h\n  window: 1d\n"
                                 "  items_per_bucket: 200\n" +
                                     filter + "redis:\n  address: \"" + redis->address() + "\"\n")),
        daemon(Shifted({EF_BINARY, "run", "-c", config, "--set", "pipeline.commit_interval=200ms"}),
               stack.dir().File("daemon.log")),
        serve(Shifted({EF_BINARY, "serve", "-c", config, "--set",
                       "serve.listen=127.0.0.1:" + std::to_string(serve_port)}),
              stack.dir().File("serve.log")),
        http("127.0.0.1", serve_port) {
    http.set_read_timeout(10, 0);
  }

  int64_t NowMs() const { return clock.NowMs(); }
  std::vector<std::string> Shifted(const std::vector<std::string>& argv) const {
    return clock.Wrap(argv);
  }
  void Produce(const std::vector<TestEvent>& events) {
    stack.Produce(events);
    all.insert(all.end(), events.begin(), events.end());
  }
  // One single-item event for users first, first + 3, ... below 12, every ~0.4 s,
  // until 8 s past the hour's end.
  void Trickle(int first) {
    using namespace std::chrono_literals;
    for (int round = 0; NowMs() < (clock.hour_end_s + 8) * 1000; ++round) {
      std::vector<TestEvent> trickle;
      for (int u = first; u < 12; u += 3)
        trickle.push_back({"u" + std::to_string(u),
                           {"t" + std::to_string(round) + "-u" + std::to_string(u)},
                           NowMs()});
      Produce(trickle);
      std::this_thread::sleep_for(400ms);
    }
  }

  struct Missing {
    size_t items = 0, cpp = 0, serve = 0, python = 0;
  };
  // Every item produced, by user, through the C++ reader (of `stored`), serve and
  // the Python reference, at now_s.
  Missing CountMissing(const Layout& stored, int64_t now_s) {
    std::map<std::string, std::vector<std::string>> by_user;
    for (const auto& e : all)
      by_user[e.user].insert(by_user[e.user].end(), e.items.begin(), e.items.end());
    auto conn = redis->Connect();
    BloomReader reader(*conn, stored);
    Missing m;
    for (const auto& [user, list] : by_user) {
      m.items += list.size();
      auto r = reader.Check(user, list, now_s);
      REQUIRE(r.ok());
      for (size_t i = 0; i < list.size(); ++i) m.cpp += !r->seen[i];
      const auto unseen = ServeUnseen(http, user, list);
      REQUIRE(unseen.has_value());
      m.serve += unseen->size();
      const RefCheck py = FormatRefCheck(redis->port(), "ef:", user, list, now_s);
      INFO(py.out.substr(0, 2000));
      REQUIRE(py.code == 0);
      m.python += py.unseen();
    }
    return m;
  }

  const ShiftedClock clock;
  std::unique_ptr<RedisServer> redis;
  Stack stack{2};
  const int serve_port;
  const std::string config;
  Process daemon, serve;
  httplib::Client http;
  std::vector<TestEvent> all;  // every event produced
};

}  // namespace ef::test
