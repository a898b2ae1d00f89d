// Redis Cluster over TLS (issue 49 item 1): a local 3-master + 3-replica
// cluster that speaks TLS only (tls-cluster and tls-replication yes), the
// daemon writing through the cluster router with redis.address a list of
// rediss:// seeds, and every item read back through a router over TLS and by
// `check` (the client library).
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "common/clock.h"
#include "config/config.h"
#include "support/cluster_missing.h"
#include "support/process.h"
#include "support/redis_cluster.h"
#include "support/stack.h"
#include "support/temp_dir.h"
#include "support/tls_certs.h"

namespace ef {
namespace {

using namespace std::chrono_literals;

}  // namespace

TEST_CASE("cluster: the daemon and readers work over TLS with rediss:// seeds", "[cluster][tls]") {
  test::TempDir certs_dir;
  const test::TlsCerts certs = test::MakeTlsCerts(certs_dir);
  test::LocalRedisCluster::Options options;
  options.tls = certs;
  test::LocalRedisCluster cluster(options);
  // Every seed written rediss://host:port.
  std::string seeds;
  for (int i = 0; i < cluster.size(); ++i)
    seeds += (i ? "," : "") + std::string("rediss://") + cluster.address(i);

  test::Stack stack(4);
  const std::string config =
      stack.WriteConfig("ef.yaml", "redis:\n  address: \"" + seeds + "\"\n  tls:\n    ca_file: \"" +
                                       certs.ca + "\"\n");
  const int64_t now_ms = SystemClock().NowMs();
  const auto events = test::MakeEvents("tlsc", 200, 5, 2, now_ms, 49);
  stack.Produce(events);
  auto daemon = stack.StartDaemon(config);
  REQUIRE(stack.AwaitCommitted(*daemon, 90s));
  INFO(daemon->Output());
  REQUIRE(daemon->Stop(SIGTERM, 30s) == 0);

  auto layout = LayoutFromConfig(FilterConfig{});
  REQUIRE(layout.ok());
  const auto missing = test::ClusterMissing(cluster, *layout, events);
  INFO("first missing: " << (missing.empty() ? "" : missing[0]));
  CHECK(missing.empty());

  // `check` (the client library's cluster path) over TLS.
  const test::TestEvent& e = events.front();
  const test::SplitRunResult r =
      test::Ef({"check", "-c", config, "-u", e.user, e.items[0], "never-seen"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("seen    " + e.items[0]) != std::string::npos);
  CHECK(r.out.find("unseen  never-seen") != std::string::npos);
}

}  // namespace ef
