// exposure-filter serve: the HTTP read API for recall services (docs/HTTP.md).
#include <spdlog/spdlog.h>

#include <cstdint>

#include "app/commands.h"
#include "app/common.h"
#include "app/reload.h"
#include "common/open_files.h"
#include "exposure_filter/client.h"
#include "serve/server.h"

namespace ef::app {
namespace {

// How often serve tries to connect while Redis has not answered since the start.
constexpr int64_t kConnectRetryMs = 1000;

void LogLayout(const exposure_filter::Client& client) {
  const exposure_filter::LayoutInfo layout = client.layout();
  spdlog::info("serve: layout v{} at prefix {}", layout.version, layout.prefix);
  if (!layout.stored)
    spdlog::warn(
        "serve: no layout stored at {}meta yet: every candidate is unseen and /readyz answers "
        "503 until the daemon stores it (with its first write)",
        layout.prefix);
}

int Serve(const ConfigArgs& args) {
  auto config = LoadOrReport(args);
  if (!config.ok()) return kExitConfig;
  const ServeConfig& sc = config->serve;  // serve.listen != metrics.listen: config/loader.cc
  InstallStopSignals(Hangup::kReload);
  ConfigReloader reloader(args, *config);  // SIGHUP: log.level, log.format

  exposure_filter::ClientOptions options;
  options.config_path = args.path;
  options.overrides = args.overrides;
  // One Redis connection per worker, and one for the control thread's /readyz
  // PING, which so never waits for a worker's connection (serve/http_server.h),
  // and one for the writer of queued marks (serve.mark_queue).
  options.pool_size = static_cast<size_t>(sc.threads) + 1 + (sc.mark_queue > 0 ? 1 : 0);
  options.timeout = std::chrono::milliseconds(sc.timeout_ms);
  options.on_error =
      sc.fail_closed ? exposure_filter::OnError::kFailClosed : exposure_filter::OnError::kFailOpen;
  // No layout stored yet (a first start before the daemon wrote, a FLUSHDB): wait
  // for it, not ready (/readyz 503), instead of exiting into a restart loop.
  options.allow_missing_layout = true;
  std::string error;
  exposure_filter::ErrorCode code = exposure_filter::ErrorCode::kOk;
  auto client = exposure_filter::Client::Create(options, &error, &code);
  // Redis not answering at start (an incident, or serve started first) is no
  // reason to exit into a restart loop: serve starts without it, answering per
  // serve.fail_closed, and connects once Redis answers. Anything else (a
  // layout that disagrees, refused credentials, a bad config) is final.
  if (!client && code != exposure_filter::ErrorCode::kUnavailable)
    return Fail(Unavailable(error), ExitCodeForClientError(code));

  // Thousands of keep-alive connections need as many file descriptors.
  const uint64_t open_files = ef::RaiseOpenFileLimit();
  serve::ServerOptions so;
  so.listen = sc.listen;
  so.limits.max_items = static_cast<size_t>(sc.max_items);
  so.limits.max_body_bytes = static_cast<size_t>(sc.max_body_bytes);
  so.limits.served_items = static_cast<size_t>(sc.served_items);
  so.threads = static_cast<int>(sc.threads);
  so.idle_timeout = std::chrono::milliseconds(sc.idle_timeout_ms);
  so.timeout = std::chrono::milliseconds(sc.timeout_ms);
  so.fail_closed = sc.fail_closed;
  so.mark_queue = static_cast<size_t>(sc.mark_queue);
  auto server = serve::Server::Start(so, client.get());
  if (!server.ok()) return Fail(server.status(), kExitConfig);  // e.g. address in use
  // The port line is what scripts and tests wait for (port 0 = a free one).
  spdlog::info(
      "serve: listening on port {} ({}; {} threads, timeout {}ms, fail {}, open files up to {})",
      (*server)->port(), sc.listen, sc.threads, sc.timeout_ms, sc.fail_closed ? "closed" : "open",
      open_files);
  if (client) {
    LogLayout(*client);
  } else {
    spdlog::error(
        "serve: {}; serving without Redis until it answers ({}), connecting again every {} ms",
        error,
        sc.fail_closed ? "not ready, queries answered 503"
                       : "ready but degraded, every candidate answered unseen",
        kConnectRetryMs);
  }
  while (!StopRequested()) {
    SleepUnlessStopped(client ? 1000 : kConnectRetryMs);
    if (client || StopRequested()) continue;
    client = exposure_filter::Client::Create(options, &error, &code);
    if (!client && code != exposure_filter::ErrorCode::kUnavailable) {
      (*server)->Stop();
      return Fail(Unavailable(error), ExitCodeForClientError(code));
    }
    if (!client) continue;
    (*server)->SetClient(client.get());
    spdlog::info("serve: Redis answers: connected");
    LogLayout(*client);
  }
  while (!StopRequested()) SleepUnlessStopped(1000);
  spdlog::info("serve: stopping: no new connections, finishing requests in flight");
  (*server)->Stop();
  const exposure_filter::ClientStats stats =
      client ? client->stats() : exposure_filter::ClientStats{};
  spdlog::info("serve: stopped after {} user queries, {} candidates, {} failed open", stats.users,
               stats.candidates, stats.failed_open);
  return kExitOk;
}

}  // namespace

Action AddServeCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "serve",
      "HTTP API for recall services: POST /v1/filter {\"user_id\", \"items\"} -> the unseen "
      "items (docs/HTTP.md)");
  auto args = std::make_shared<ConfigArgs>();
  AddConfigOptions(cmd, args.get(), false);
  cmd->footer(
      "Config keys serve.listen, serve.threads, serve.timeout, serve.max_items,\n"
      "serve.max_body_bytes, serve.fail_closed, serve.served_ttl, serve.served_items,\n"
      "serve.served_fpr (docs/CONFIG.md); filter.* and redis.* as for\n"
      "`run`. Exits 4 on a bad config or a serve.listen it cannot bind, 5 when the stored\n"
      "layout disagrees, 3 when Redis refuses the credentials (docs/CLI.md#exit-codes).\n"
      "A Redis that does not answer is waited for: serve starts without it (ready but\n"
      "degraded when fail open, not ready when fail closed; docs/HTTP.md). Example:\n"
      "  exposure-filter serve -c config/exposure-filter.yaml --set serve.listen=0.0.0.0:8090\n"
      "  curl -s localhost:8090/v1/filter -d '{\"user_id\": \"u1\", \"items\": [\"i1\", \"i2\"]}'\n"
      "Paged feeds: add \"mark_served\": 10 to mark the first 10 unseen items served, so that\n"
      "the next page leaves them out; POST /v1/served {\"user_id\", \"items\"} marks items.");
  return [args] { return Serve(*args); };
}

}  // namespace ef::app
