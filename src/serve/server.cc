#include "serve/server.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <string_view>

#include "exposure_filter/client.h"
#include "metrics/build_info.h"
#include "metrics/process_metrics.h"
#include "metrics/scrape_sample.h"
#include "net/listen_address.h"
#include "serve/connection_stream.h"
#include "serve/http_server.h"
#include "serve/mark_writer.h"

namespace ef::serve {
namespace {

namespace pm = prometheus;
using exposure_filter::Client;
using exposure_filter::ErrorCode;
using exposure_filter::Result;

constexpr const char* kJson = "application/json";

enum Endpoint { kFilter, kBatch, kServed, kMetrics, kHealthz, kReadyz, kOther, kEndpointCount };
constexpr std::array<const char*, kEndpointCount> kEndpointNames = {
    "filter", "filter_batch", "served", "metrics", "healthz", "readyz", "other"};

Endpoint EndpointOf(const std::string& path) {
  if (path == "/v1/filter") return kFilter;
  if (path == "/v1/filter:batch") return kBatch;
  if (path == "/v1/served") return kServed;
  if (path == "/metrics") return kMetrics;
  if (path == "/healthz") return kHealthz;
  if (path == "/readyz") return kReadyz;
  return kOther;
}

struct Metrics {
  explicit Metrics(pm::Registry& r)
      : requests(pm::BuildCounter()
                     .Name("exposure_filter_serve_requests_total")
                     .Help("HTTP requests answered, by endpoint and status code")
                     .Register(r)),
        candidates(pm::BuildCounter()
                       .Name("exposure_filter_serve_candidates_total")
                       .Help("Candidate items checked (seen ratio: "
                             "exposure_filter_serve_candidates_seen_total / this)")
                       .Register(r)
                       .Add({})),
        seen(pm::BuildCounter()
                 .Name("exposure_filter_serve_candidates_seen_total")
                 .Help("Candidate items found seen (filtered out)")
                 .Register(r)
                 .Add({})),
        served(pm::BuildCounter()
                   .Name("exposure_filter_serve_candidates_served_total")
                   .Help("Candidate items found served recently, not seen (pseudo-exposures, "
                         "filtered out: mark_served, /v1/served)")
                   .Register(r)
                   .Add({})),
        near_duplicates(pm::BuildCounter()
                            .Name("exposure_filter_serve_near_duplicates_total")
                            .Help("Candidate items found near duplicates, not seen: an item of "
                                  "their content cluster was seen (filter.near_duplicates, "
                                  "filtered out)")
                            .Register(r)
                            .Add({})),
        users(pm::BuildCounter()
                  .Name("exposure_filter_serve_users_total")
                  .Help("User queries answered (a batch counts each of its requests)")
                  .Register(r)
                  .Add({})),
        failed_open(pm::BuildCounter()
                        .Name("exposure_filter_serve_failed_open_total")
                        .Help("User queries answered with every item unseen because Redis "
                              "failed or was slower than serve.timeout (fail open)")
                        .Register(r)
                        .Add({})),
        failed_closed(pm::BuildCounter()
                          .Name("exposure_filter_serve_failed_closed_total")
                          .Help("User queries answered 503 because Redis failed or was slower "
                                "than serve.timeout (serve.fail_closed)")
                          .Register(r)
                          .Add({})) {
    auto& family = pm::BuildHistogram()
                       .Name("exposure_filter_serve_request_duration_seconds")
                       .Help(
                           "Time from the request's headers read to the response written, "
                           "by endpoint")
                       .Register(r);
    const pm::Histogram::BucketBoundaries bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003,
                                                    0.005,  0.01,    0.025,  0.05,  0.1,   0.25,
                                                    0.5,    1,       2.5,    10};
    for (int e = 0; e < kEndpointCount; ++e)
      latency[e] = &family.Add({{"endpoint", kEndpointNames[e]}}, bounds);
    // The series the alerts' ratios read (config/alerts.yml ExposureFilterServeErrors)
    // exist from 0: a series born at 1 hides its first increase from rate().
    for (Endpoint e : {kFilter, kBatch, kServed})
      for (int status : {200, 400, 500, 503}) RequestCounter(e, status);
    RegisterBuildInfo(r);
  }

  pm::Family<pm::Counter>& requests;
  // requests' counter per endpoint and status 100-599, made on first use (Add
  // builds a label map and locks the family: too much for every request).
  static constexpr int kMinStatus = 100, kMaxStatus = 599;
  std::array<std::array<std::atomic<pm::Counter*>, kMaxStatus - kMinStatus + 1>, kEndpointCount>
      request_counters{};

  pm::Counter& RequestCounter(Endpoint e, int status) {
    std::atomic<pm::Counter*>* slot = status >= kMinStatus && status <= kMaxStatus
                                          ? &request_counters[e][status - kMinStatus]
                                          : nullptr;
    if (pm::Counter* c = slot ? slot->load(std::memory_order_acquire) : nullptr) return *c;
    char code[8];
    auto [end, ec] = std::to_chars(code, code + sizeof code, status);
    pm::Counter& c =
        requests.Add({{"endpoint", kEndpointNames[e]}, {"code", std::string(code, end)}});
    if (slot != nullptr) slot->store(&c, std::memory_order_release);  // Add returns the same one
    return c;
  }
  pm::Counter& candidates;
  pm::Counter& seen;
  pm::Counter& served;
  pm::Counter& near_duplicates;
  pm::Counter& users;
  pm::Counter& failed_open;
  pm::Counter& failed_closed;
  std::array<pm::Histogram*, kEndpointCount> latency{};
  std::atomic<int64_t> last_warning_ms{0};
  std::atomic<int64_t> last_mark_warning_ms{0};

  // True at most once per 10 s per `last_ms`: a Redis outage fails every request.
  static bool Due(std::atomic<int64_t>& last_ms) {
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
    int64_t last = last_ms.load();
    return now - last >= 10'000 && last_ms.compare_exchange_strong(last, now);
  }

  void WarnRedis(const Result& r) {
    if (!Due(last_warning_ms)) return;
    spdlog::warn("serve: {} ({}; counted in exposure_filter_serve_{}_total)", r.error,
                 r.ok ? "answered with every item unseen" : "answered 503",
                 r.ok ? "failed_open" : "failed_closed");
  }

  // A mark of served items that failed (FilterAndMark's mark_failed, or /v1/served).
  void WarnMark(const std::string& error, const char* answered) {
    if (!Due(last_mark_warning_ms)) return;
    spdlog::warn(
        "serve: {} (served items not marked; {}; counted in "
        "exposure_filter_serve_mark_errors_total)",
        error, answered);
  }

  void Count(const Result& r, size_t items) {
    users.Increment();
    if (r.mark_failed) {
      WarnMark(r.error, "answered without the marks, \"mark_failed\": true");
    } else if (r.failed_open || !r.ok) {
      WarnRedis(r);
    }
    if (!r.ok) {
      failed_closed.Increment();
      return;
    }
    candidates.Increment(static_cast<double>(items));
    seen.Increment(static_cast<double>(r.seen_count));
    if (r.served_count > 0) served.Increment(static_cast<double>(r.served_count));
    if (r.near_duplicate_count > 0)
      near_duplicates.Increment(static_cast<double>(r.near_duplicate_count));
    if (r.failed_open) failed_open.Increment();
  }
};

// Families computed from the client at scrape time.
constexpr char kReadyHelp[] = "1 when the most recent call or health check reached Redis, else 0";

void AppendClientFamilies(const Client& client, std::vector<pm::MetricFamily>* out) {
  const exposure_filter::ClientStats stats = client.stats();
  auto counter = [&](const char* name, const char* help, uint64_t value) {
    AppendSample(out, name, help, pm::MetricType::Counter, static_cast<double>(value));
  };
  counter("exposure_filter_serve_redis_errors_total",
          "Redis failures seen by the client (connect, I/O, timeout, error reply, layout)",
          stats.redis_errors);
  AppendSample(out, "exposure_filter_serve_ready", kReadyHelp, pm::MetricType::Gauge,
               client.Ready() ? 1 : 0);
  counter("exposure_filter_serve_items_marked_total",
          "Items marked served (mark_served on /v1/filter, and /v1/served)", stats.marked);
  counter("exposure_filter_serve_invalid_keys_total",
          "Bucket keys read whose value names no size class (layout version 4, docs/FORMAT.md "
          "rule 11): left out of the answer, which comes from the user's other keys",
          stats.invalid_keys);
  counter("exposure_filter_serve_mark_errors_total",
          "Marks of served items that failed (Redis; also counted in "
          "exposure_filter_serve_redis_errors_total)",
          stats.mark_errors);
  // filter.near_duplicates: the content map's answers (docs/CONTENT.md rule 5).
  counter("exposure_filter_serve_cluster_lookups_total",
          "Candidates whose near-duplicate cluster was looked up in the content map, through its "
          "local cache (filter.near_duplicates, no cluster in the request)",
          stats.cluster_lookups);
  counter("exposure_filter_serve_cluster_cache_hits_total",
          "Of exposure_filter_serve_cluster_lookups_total: answered by the local cache of the "
          "content map (a cluster, or a recent \"not known\"; serve.content_cache_bytes)",
          stats.cluster_cache_hits);
  counter("exposure_filter_serve_cluster_cache_misses_total",
          "Of exposure_filter_serve_cluster_lookups_total: read from the content map in Redis",
          stats.cluster_cache_misses);
  AppendSample(out, "exposure_filter_serve_cluster_cache_bytes",
               "Bytes the local cache of the content map holds (at most "
               "serve.content_cache_bytes)",
               pm::MetricType::Gauge, static_cast<double>(stats.cluster_cache_bytes));
  counter("exposure_filter_serve_clusters_unknown_total",
          "Of exposure_filter_serve_cluster_lookups_total: candidates the content map did not "
          "know (not indexed yet, expired, or a bad value), tested by their item ID alone",
          stats.clusters_unknown);
  counter("exposure_filter_serve_content_map_bad_values_total",
          "Of exposure_filter_serve_clusters_unknown_total: content map values that were not a "
          "map entry (shorter than 17 bytes, or no cluster ID)",
          stats.map_bad_values);
}

// The body moved in (set_content would copy it), as JSON.
void SetJson(httplib::Response& res, std::string body) {
  res.body = std::move(body);
  res.set_header("Content-Type", kJson);
}

void SetError(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  SetJson(res, ErrorResponse(message));
}

// An error for a request whose body is left unread: the connection ends after
// the answer (the body is not taken for a next request).
void RefuseAndClose(httplib::Response& res, int status, std::string_view message) {
  SetError(res, status, message);
  res.set_header("Connection", "close");
  ConnectionStream::CloseAfterResponse();
}

// The methods a known path answers ("" for an unknown path).
std::string AllowedOn(const std::string& path) {
  if (path == "/v1/filter" || path == "/v1/filter:batch" || path == "/v1/served") return "POST";
  if (path == "/metrics" || path == "/healthz" || path == "/readyz") return "GET, HEAD";
  return "";
}

void NotAllowed(const httplib::Request& req, httplib::Response& res, const std::string& allow) {
  res.set_header("Allow", allow);
  SetError(res, 405,
           "method " + req.method + " not allowed on " + req.path + " (allowed: " + allow + ")");
}

// "5 s", or "1500 ms" when not whole seconds.
std::string SecondsText(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                               : std::to_string(d.count()) + " ms";
}

// When the current request's headers were read (pre-routing): each worker thread
// serves one request at a time.
thread_local std::chrono::steady_clock::time_point t_request_start;
thread_local bool t_request_started = false;

}  // namespace

// What a query gets while serve has no client (Redis did not answer at start):
// what the client answers when Redis fails (include/exposure_filter/client.h).
Result NotConnected(size_t items, bool fail_closed) {
  Result r;
  r.ok = !fail_closed;
  r.failed_open = !fail_closed;
  r.code = ErrorCode::kUnavailable;
  r.error = "not connected to Redis yet (it did not answer when serve started; retrying)";
  r.seen.assign(items, false);
  r.served.assign(items, false);
  r.near_duplicate.assign(items, false);
  return r;
}

struct Server::Impl {
  ServerOptions options;
  // Null until Redis answered (Server::Start's contract); set once.
  std::atomic<Client*> client{nullptr};
  std::shared_ptr<pm::Registry> registry = std::make_shared<pm::Registry>();
  Metrics metrics{*registry};
  HttpServer http;
  int port = 0;
  // Marks written after the answer (serve.mark_queue > 0 under fail open).
  std::unique_ptr<MarkWriter> marks;

  // FilterAndMark with the write queued when the queue takes it (the answer says
  // "mark_queued": true), else written before answering.
  Result FilterAndMark(Client* client, const ParsedQuery& q, Answer* answer) {
    exposure_filter::CallOptions call;
    call.deadline = options.timeout;
    answer->marking = true;
    if (!marks) {
      Result r =
          client->FilterAndMarkWithClusters(q.user, q.items, q.clusters, q.mark_served, call);
      answer->marked = r.marked_count;
      answer->mark_failed = r.mark_failed;
      return r;
    }
    const auto start = std::chrono::steady_clock::now();
    exposure_filter::MarkPlan plan;
    Result r = client->FilterAndPlanMark(q.user, q.items, q.clusters, q.mark_served, call, &plan);
    answer->marked = r.marked_count;
    if (plan.entries == 0) return r;
    if (marks->Enqueue(&plan)) {
      answer->mark_queued = true;
      return r;
    }
    // The queue is full: written now, within what is left of serve.timeout.
    const auto used = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    call.deadline = std::max(std::chrono::milliseconds(1), options.timeout - used);
    const exposure_filter::MarkResult m = client->WriteMarks({&plan, 1}, call).front();
    if (m.ok && !m.failed_open) return r;
    r.marked.assign(r.marked.size(), false);
    r.marked_count = answer->marked = 0;
    r.mark_failed = answer->mark_failed = true;
    r.code = m.code;
    r.error = m.error;
    return r;
  }

  void Filter(std::string_view body, httplib::Response& res) {
    thread_local RequestParser parser;
    ParsedQuery q;
    ParseError err;
    if (!parser.ParseFilter(body, options.limits, &q, &err))
      return SetError(res, err.status, err.message);
    Answer answer;
    Result r;
    Client* client = this->client.load(std::memory_order_acquire);
    if (client == nullptr) {
      r = NotConnected(q.items.size(), options.fail_closed);
      answer.marking = q.mark_served > 0;
      answer.mark_failed = q.mark_served > 0;
    } else if (q.mark_served > 0) {
      r = FilterAndMark(client, q, &answer);
    } else if (!q.clusters.empty()) {
      exposure_filter::CallOptions call;
      call.deadline = options.timeout;
      r = client->SeenWithClusters(q.user, q.items, q.clusters, call);
    } else {
      r = client->SeenViews(q.user, q.items, options.timeout);
    }
    metrics.Count(r, q.items.size());
    if (!r.ok) return SetError(res, r.code == ErrorCode::kInvalidArgument ? 400 : 503, r.error);
    answer.seen = &r.seen;
    answer.failed_open = r.failed_open;
    answer.served = &r.served;
    answer.served_count = r.served_count;
    answer.near_duplicate = &r.near_duplicate;
    answer.near_duplicate_count = r.near_duplicate_count;
    answer.clusters = &r.cluster;
    SetJson(res, FilterResponse(q, answer));
  }

  void Served(std::string_view body, httplib::Response& res) {
    thread_local RequestParser parser;
    ParsedQuery q;
    ParseError err;
    if (!parser.ParseServed(body, options.limits, &q, &err))
      return SetError(res, err.status, err.message);
    exposure_filter::CallOptions call;
    call.deadline = options.timeout;
    Client* client = this->client.load(std::memory_order_acquire);
    exposure_filter::MarkResult m;
    if (client != nullptr) {
      m = client->MarkServedViews(q.user, q.items, call);
    } else {
      const Result r = NotConnected(0, options.fail_closed);
      m.ok = r.ok;
      m.failed_open = r.failed_open;
      m.code = r.code;
      m.error = r.error;
    }
    if (!m.ok) {
      if (m.code == ErrorCode::kInvalidArgument) return SetError(res, 400, m.error);
      metrics.WarnMark(m.error, "answered 503");
      return SetError(res, 503, m.error);
    }
    if (m.failed_open) metrics.WarnMark(m.error, "answered 200 with \"failed_open\": true");
    SetJson(res, ServedResponse(m.marked, m.filled, m.failed_open));
  }

  void Batch(std::string_view body, httplib::Response& res) {
    thread_local RequestParser parser;
    std::vector<ParsedQuery> parsed;
    ParseError err;
    if (!parser.ParseBatch(body, options.limits, &parsed, &err))
      return SetError(res, err.status, err.message);
    if (parsed.empty()) return SetJson(res, BatchResponse({}, {}));
    // The users and items are read in place (views into `parsed` and the parser).
    std::vector<exposure_filter::QueryView> queries(parsed.size());
    for (size_t i = 0; i < parsed.size(); ++i)
      queries[i] = {parsed[i].user, parsed[i].items, parsed[i].clusters};
    Client* client = this->client.load(std::memory_order_acquire);
    std::vector<Result> results;
    if (client != nullptr) {
      results = client->SeenBatchViews(queries, options.timeout);
    } else {
      for (const auto& p : parsed)
        results.push_back(NotConnected(p.items.size(), options.fail_closed));
    }
    std::vector<Answer> answers(parsed.size());
    const Result* failed = nullptr;
    for (size_t i = 0; i < parsed.size(); ++i) {
      metrics.Count(results[i], parsed[i].items.size());
      if (!results[i].ok && failed == nullptr) failed = &results[i];
      answers[i] = Answer{&results[i].seen, results[i].failed_open, &results[i].served,
                          results[i].served_count};
      answers[i].near_duplicate = &results[i].near_duplicate;
      answers[i].near_duplicate_count = results[i].near_duplicate_count;
      answers[i].clusters = &results[i].cluster;
    }
    if (failed != nullptr) {
      // Every user ID was checked by the parser, so this is Redis under fail_closed.
      return SetError(res, failed->code == ErrorCode::kInvalidArgument ? 400 : 503, failed->error);
    }
    SetJson(res, BatchResponse(parsed, answers));
  }

  // Every request with a body (POST, PUT, PATCH, DELETE) comes here, read
  // through httplib's content reader up to serve.max_body_bytes whatever its
  // Content-Type. httplib's own read (into req.body) refuses a body typed
  // application/x-www-form-urlencoded, as `curl -d` sends it, over 8 KiB and
  // parses it as a form (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH, fixed
  // in Debian's compiled library).
  void WithBody(const httplib::Request& req, httplib::Response& res,
                const httplib::ContentReader& read) {
    if (req.is_multipart_form_data()) {
      // The content reader would hand it to its multipart parser; never JSON.
      // The unread body ends the connection.
      return RefuseAndClose(res, 415,
                            "Content-Type multipart/form-data is not accepted: send the JSON body "
                            "as is (any other Content-Type)");
    }
    const size_t max = options.limits.max_body_bytes;
    std::string body;
    body.reserve(
        std::min(max, static_cast<size_t>(req.get_header_value<uint64_t>("Content-Length"))));
    bool over = false;  // without a Content-Length, httplib reads to the end of stream
    const bool whole = read([&](const char* data, size_t size) {
      over = body.size() + size > max;
      if (!over) body.append(data, size);
      return !over;
    });
    if (!whole) {  // httplib set 413 (Content-Length over the limit) or 400 / 408 (cut short)
      if (over) {
        res.status = 413;
        res.set_header("Connection", "close");
        ConnectionStream::CloseAfterResponse();
      }
      return;
    }
    if (req.method == "POST" && req.path == "/v1/filter") return Filter(body, res);
    if (req.method == "POST" && req.path == "/v1/filter:batch") return Batch(body, res);
    if (req.method == "POST" && req.path == "/v1/served") return Served(body, res);
    const std::string allow = AllowedOn(req.path);
    if (allow.empty()) {
      res.status = 404;  // the error handler's message
      return;
    }
    NotAllowed(req, res, allow);
  }

  void Log(const httplib::Request& req, const httplib::Response& res) {
    const Endpoint e = EndpointOf(req.path);
    metrics.RequestCounter(e, res.status).Increment();
    if (t_request_started) {
      t_request_started = false;
      metrics.latency[e]->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t_request_start)
              .count());
    }
  }

  void Routes() {
    http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
      t_request_start = std::chrono::steady_clock::now();
      t_request_started = true;
      // cpp-httplib 0.11 reads a chunked body whole, past set_payload_max_length:
      // refused from the headers, before any of it is read; the unread body
      // ends the connection.
      if (req.has_header("Transfer-Encoding")) {
        RefuseAndClose(res, 411,
                       "Transfer-Encoding is not accepted: send the body with a Content-Length "
                       "(at most serve.max_body_bytes)");
        return httplib::Server::HandlerResponse::Handled;
      }
      // Without a Content-Length, httplib would read a body to the end of
      // stream: a client that keeps its connection open would wait for the
      // request's deadline (408). Refused from the headers instead.
      if ((req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
          !req.has_header("Content-Length")) {
        RefuseAndClose(res, 411,
                       "a body needs a Content-Length (at most serve.max_body_bytes), also an "
                       "empty one: Content-Length: 0");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    const httplib::Server::HandlerWithContentReader with_body =
        [this](const httplib::Request& req, httplib::Response& res,
               const httplib::ContentReader& read) { WithBody(req, res, read); };
    http.Post(".*", with_body);
    http.Put(".*", with_body);
    http.Patch(".*", with_body);
    http.Delete(".*", with_body);
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::vector<pm::MetricFamily> families = registry->Collect();
      Client* client = this->client.load(std::memory_order_acquire);
      if (client != nullptr) {
        AppendClientFamilies(*client, &families);
      } else {  // not connected yet (Server::Start)
        AppendSample(&families, "exposure_filter_serve_ready", kReadyHelp, pm::MetricType::Gauge,
                     0);
      }
      AppendSample(&families, "exposure_filter_serve_degraded",
                   "1 while a fail-open serve answers without Redis (the most recent call or "
                   "health check did not reach it): ready, but every candidate is answered unseen",
                   pm::MetricType::Gauge,
                   !options.fail_closed && (client == nullptr || !client->Ready()) ? 1 : 0);
      AppendSample(&families, "exposure_filter_serve_open_connections",
                   "HTTP connections open now (idle keep-alive ones included: they hold no "
                   "worker)",
                   pm::MetricType::Gauge, static_cast<double>(http.OpenConnections()));
      AppendProcessFamilies(&families);
      res.set_content(pm::TextSerializer().Serialize(families),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    http.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      Client* client = this->client.load(std::memory_order_acquire);
      if (client == nullptr) {
        res.status = options.fail_closed ? 503 : 200;
        res.set_content(options.fail_closed
                            ? "not ready: not connected to Redis yet (it did not answer when "
                              "serve started; retrying)\n"
                            : "ready, degraded: not connected to Redis yet (it did not answer "
                              "when serve started; retrying); every candidate is answered unseen "
                              "(serve.fail_closed is false)\n",
                        "text/plain");
        return;
      }
      // A PING also looks for a layout not stored yet (at most once a second).
      const bool reached = client->Ping(options.timeout);
      const exposure_filter::LayoutInfo layout = client->layout();
      std::string body;
      if (layout.lost) {
        body = "not ready: " + layout.prefix +
               "meta was lost (DEL, FLUSHALL?): answering with the layout last stored (version " +
               std::to_string(layout.version) + ") until a writer stores it again\n";
      } else if (reached && !layout.stored) {
        body = "not ready: no layout stored at " + layout.prefix +
               "meta yet (nothing written with this key prefix: the daemon stores it with its "
               "first write)\n";
      } else if (!reached && options.fail_closed) {
        body =
            "not ready: Redis did not answer PING within serve.timeout (serve.fail_closed: "
            "requests get 503)\n";
      }
      res.status = body.empty() ? 200 : 503;
      if (body.empty())
        body = reached ? "ready\n"
                       : "ready, degraded: Redis did not answer PING within serve.timeout; every "
                         "candidate is answered unseen (serve.fail_closed is false)\n";
      res.set_content(body, "text/plain");
    });
    // The other methods on known paths: 405 with Allow (with a body: WithBody).
    for (const char* path :
         {"/v1/filter", "/v1/filter:batch", "/v1/served", "/metrics", "/healthz", "/readyz"}) {
      const std::string allow = AllowedOn(path);
      auto handler = [allow](const httplib::Request& req, httplib::Response& res) {
        NotAllowed(req, res, allow);
      };
      if (allow == "POST") http.Get(path, handler);
      http.Options(path, handler);
    }
    // 404 and httplib's own errors (413 from the payload limit, 400 for a bad
    // request line) get a JSON body; responses that have one keep it.
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          std::string message;
          switch (res.status) {
            case 404:
              message = "no such path: " + req.path +
                        " (POST /v1/filter, POST /v1/filter:batch, POST /v1/served, GET /metrics, "
                        "/healthz, /readyz)";
              break;
            case 408:
              message = "request not received within " + SecondsText(options.request_timeout) +
                        " of its first byte (headers and body)";
              break;
            case 413:
              message = "body larger than serve.max_body_bytes (" +
                        std::to_string(options.limits.max_body_bytes) + ")";
              break;
            case 431:
              message = "request header fields too large: at most " +
                        std::to_string(ConnectionStream::kMaxHeaderFields) + " fields and " +
                        std::to_string(ConnectionStream::kMaxHeadBytes) +
                        " bytes from the request line to the blank line";
              break;
            default:
              message = "HTTP " + std::to_string(res.status);
          }
          SetError(res, res.status, message);
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_logger(
        [this](const httplib::Request& req, const httplib::Response& res) { Log(req, res); });
  }
};

StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options, Client* client) {
  auto address = net::ParseListen("serve.listen", options.listen);
  if (!address.ok()) return address.status();
  const std::string& host = address->host;
  const int port = address->port;

  std::unique_ptr<Server> s(new Server());
  s->impl_ = std::make_unique<Impl>();
  Impl& impl = *s->impl_;
  impl.options = options;
  impl.client.store(client, std::memory_order_release);
  const int threads = std::max(1, options.threads);
  impl.http.set_worker_threads(threads);
  impl.http.set_control_paths({"/healthz", "/readyz", "/metrics"});
  impl.http.set_keep_alive_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(options.idle_timeout).count());
  impl.http.set_keep_alive_max_count(1'000'000);
  impl.http.set_payload_max_length(options.limits.max_body_bytes);
  impl.http.set_read_timeout(options.request_timeout);
  impl.http.set_socket_options(net::SetListenSocketOptions);
  impl.Routes();
  int bound = port == 0 ? impl.http.bind_to_any_port(host.c_str())
                        : (impl.http.bind_to_port(host.c_str(), port) ? port : -1);
  if (bound < 0)
    return InvalidArgument("serve.listen " + options.listen + ": " + net::ListenError(*address));
  impl.port = bound;
  if (options.mark_queue > 0 && !options.fail_closed) {
    MarkWriter::Options mo;
    mo.capacity = options.mark_queue;
    mo.timeout = options.timeout;
    impl.marks = std::make_unique<MarkWriter>(mo, &impl.client, *impl.registry);
  }
  impl.http.ListenInBackground();
  return s;
}

int Server::port() const { return impl_->port; }

void Server::SetClient(Client* client) { impl_->client.store(client, std::memory_order_release); }

void Server::Stop() {
  if (!impl_) return;
  impl_->http.StopListening();
  // After the requests in flight, which may queue marks.
  if (impl_->marks) impl_->marks->Stop();
}

Server::~Server() { Stop(); }

}  // namespace ef::serve
