// exposure-filter bench-redis: "the Redis ceiling". How many events/s Redis
// absorbs with exactly the daemon's write pattern (layout, key distribution,
// BITFIELD or SETBIT, batch size and per-key coalescing, RedisBitWriter), with
// no Kafka and no decoding in the timed part.
//
// Preparation (not timed): EventGenerator payloads (as loadgen produces them) ->
// Decoder -> Coalescer, in batches of --batch events like the pipeline; every
// sealed BitBatch is kept in memory. Timed: RedisBitWriter::Write per batch, in
// order. Redis CPU comes from INFO cpu before and after.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/bit_batch.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/duration.h"
#include "event/decoder.h"
#include "event/event.h"
#include "loadgen/generator.h"
#include "pipeline/coalescer.h"
#include "redis/cluster.h"
#include "redis/connection.h"
#include "redis/meta.h"
#include "write/bit_writer.h"
#include "write/cluster_writer.h"

namespace ef::app {
namespace {

struct BenchRedisArgs {
  ConfigArgs config;
  uint64_t events = 2000000;
  GeneratorOptions gen;
  std::string spread = "2d";
  int64_t batch = 0;  // 0 = pipeline.batch_max_events
  bool json = false;
  bool allow_existing = false;
  size_t connections = 2;
};

// SCAN MATCH pattern text matching `s` literally.
std::string GlobEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A key with the prefix other than the meta key, or "" when there is none.
StatusOr<std::string> FindExistingKey(RedisConnection& conn, const std::string& prefix) {
  const std::string where = "redis " + conn.address() + " db " + std::to_string(conn.options().db);
  auto size = conn.Command({"DBSIZE"});
  if (!size.ok()) return size.status();
  if (size->type == RedisReply::Type::kError) return Unavailable(where + ": DBSIZE: " + size->str);
  if (size->type == RedisReply::Type::kInteger && size->integer == 0) return std::string();
  const std::string meta = MetaKey(prefix);
  const std::string pattern = GlobEscape(prefix) + "*";
  std::string cursor = "0";
  do {
    auto r = conn.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError) return Unavailable(where + ": SCAN: " + r->str);
    if (r->type != RedisReply::Type::kArray || r->elements.size() != 2)
      return Internal(where + ": SCAN: unexpected reply");
    cursor = r->elements[0].str;
    for (const auto& key : r->elements[1].elements)
      if (key.str != meta) return key.str;
  } while (cursor != "0");
  return std::string();
}

// used_cpu_user + used_cpu_sys of the server process, in seconds.
StatusOr<double> RedisCpuSeconds(RedisConnection& conn) {
  auto r = conn.Command({"INFO", "cpu"});
  if (!r.ok()) return r.status();
  if (r->type == RedisReply::Type::kError)
    return Unavailable("redis " + conn.address() + ": INFO cpu: " + r->str);
  double user = -1, sys = -1;
  std::string_view text = r->str;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon);
    double* target = name == "used_cpu_user" ? &user : name == "used_cpu_sys" ? &sys : nullptr;
    if (target) *target = std::strtod(std::string(line.substr(colon + 1)).c_str(), nullptr);
  }
  if (user < 0 || sys < 0)
    return Internal("redis " + conn.address() + ": INFO cpu has no used_cpu_user/used_cpu_sys");
  return user + sys;
}

// 1234567 -> "1,234,567".
std::string Grouped(double value) {
  std::string digits = std::to_string(static_cast<unsigned long long>(std::max(0.0, value + 0.5)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

int BenchRedis(BenchRedisArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitConfig;
  InstallStopSignals();
  auto ms = DurationOption(a.spread, "--spread", /*allow_zero=*/true);
  if (!ms.ok()) return Fail(ms.status(), kExitUsage);
  a.gen.spread_ms = *ms;
  if (a.gen.spread_ms >= config->filter.window_seconds * 1000)
    return Fail(InvalidArgument("--spread " + a.spread + ": must be shorter than filter.window (" +
                                FormatDurationMs(config->filter.window_seconds * 1000) +
                                "), or older events are rejected as too old"),
                kExitUsage);
  const size_t batch_events =
      static_cast<size_t>(a.batch > 0 ? a.batch : config->pipeline.batch_max_events);
  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitConfig);
  auto redis = RedisOptionsFromConfig(config->redis);
  if (!redis.ok()) return Fail(redis.status(), kExitConfig);

  // The nodes written to: the one Redis, or every master of a Redis Cluster.
  auto use_cluster = UseCluster(*redis);
  if (!use_cluster.ok()) return Fail(use_cluster.status(), ExitCodeForStart(use_cluster.status()));
  std::unique_ptr<RedisConnection> single;
  std::unique_ptr<ClusterRouter> router;
  std::vector<RedisConnection*> nodes;
  std::string where;
  if (*use_cluster) {
    auto ro = ClusterOptionsFrom(*redis);
    if (!ro.ok()) return Fail(ro.status(), kExitConfig);
    router = std::make_unique<ClusterRouter>(*ro);
    if (Status ds = router->Discover(); !ds.ok()) return Fail(ds, ExitCodeForStart(ds));
    for (const auto& shard : router->slot_map().shards()) {
      auto c = router->Connection(shard.master);
      if (!c.ok()) return Fail(c.status());
      nodes.push_back(*c);
    }
    where = "Redis Cluster (" + std::to_string(nodes.size()) + " masters)";
  } else {
    auto control = RedisConnection::Connect(*redis);
    if (!control.ok()) return Fail(control.status(), ExitCodeForStart(control.status()));
    single = std::move(control.value());
    nodes.push_back(single.get());
    where = single->address() + " db " + std::to_string(redis->db);
  }
  // Refuse to write benchmark bits into data that may be production's.
  for (RedisConnection* node : nodes) {
    if (a.allow_existing) break;
    auto existing = FindExistingKey(*node, layout->prefix);
    if (!existing.ok()) return Fail(existing.status());
    if (!existing->empty())
      return Fail(FailedPrecondition(
                      "redis " + where + " already has keys with prefix '" + layout->prefix +
                      "' (e.g. '" + *existing +
                      "'); bench-redis sets real filter bits there, so it refuses to run against "
                      "data that may be production's: point redis.address/redis.db at an empty "
                      "Redis (or set filter.key_prefix), or pass --allow-existing to write anyway"),
                  kExitUsage);
  }
  Layout effective;
  Status st =
      router ? EnsureMeta(*router, *layout, &effective) : EnsureMeta(*single, *layout, &effective);
  if (!st.ok()) return Fail(st, ExitCodeForStart(st));
  // Redis CPU: summed over the nodes.
  auto redis_cpu_seconds = [&]() -> StatusOr<double> {
    double sum = 0;
    for (RedisConnection* node : nodes) {
      auto c = RedisCpuSeconds(*node);
      if (!c.ok()) return c.status();
      sum += *c;
    }
    return sum;
  };

  // Preparation: the daemon's decode and coalesce, batch by batch, kept in memory.
  using SC = std::chrono::steady_clock;
  const bool tty = isatty(2);
  auto last_progress = SC::now();
  EventGenerator gen(a.gen);
  Decoder decoder(config->events, config->filter);
  Coalescer coalescer(*layout);
  SystemClock clock;
  GeneratedEvent ev;
  Event event;
  std::vector<BitBatch> batches;
  std::array<uint64_t, static_cast<size_t>(RejectReason::kCount_)> rejected_by_reason{};
  uint64_t rejected = 0, items = 0;
  for (uint64_t done = 0; done < a.events;) {
    if (StopRequested()) return Fail(Cancelled("stopped while preparing"));
    const int64_t now_ms = clock.NowMs();
    const uint64_t end = std::min<uint64_t>(a.events, done + batch_events);
    for (; done < end; ++done) {
      gen.Next(now_ms, &ev);
      RejectReason r =
          decoder.Decode(ev.payload.data(), ev.payload.size(), ev.ts_ms, now_ms, &event);
      if (r != RejectReason::kNone) {
        ++rejected;
        ++rejected_by_reason[static_cast<size_t>(r)];
        continue;
      }
      coalescer.Add(event);
      items += event.items.size();
    }
    if (!coalescer.empty()) {  // like the daemon: a batch of rejects only writes nothing
      coalescer.Seal();
      const BitBatch& sealed = coalescer.batch();
      BitBatch& copy = batches.emplace_back();
      copy.keys.assign(sealed.keys.begin(),
                       sealed.keys.begin() + static_cast<ptrdiff_t>(sealed.size));
      copy.size = sealed.size;
    }
    coalescer.Clear();
    if (tty && (done == a.events || SC::now() - last_progress >= std::chrono::milliseconds(200))) {
      last_progress = SC::now();
      std::fprintf(stderr, "\rbench-redis: preparing %llu / %llu events, %zu batches   ",
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(a.events),
                   batches.size());
    }
  }
  if (tty) std::fprintf(stderr, "\n");
  if (rejected > 0) {
    std::string reasons;
    for (size_t r = 1; r < rejected_by_reason.size(); ++r)
      if (rejected_by_reason[r])
        reasons += std::string(reasons.empty() ? "" : ", ") +
                   RejectReasonName(static_cast<RejectReason>(r)) + " " +
                   std::to_string(rejected_by_reason[r]);
    std::fprintf(stderr,
                 "exposure-filter: note: %llu of %llu generated events rejected (%s); check "
                 "events.* in the config\n",
                 static_cast<unsigned long long>(rejected),
                 static_cast<unsigned long long>(a.events), reasons.c_str());
  }
  if (batches.empty())
    return Fail(InvalidArgument("no event passed decoding: nothing to write (check events.*)"),
                kExitConfig);

  // Writers connect on their first Write: connect with an empty batch first so
  // the timed part holds writes only. With several connections, writer t writes
  // batches t, t+n, t+2n, ... on a thread of its own.
  const size_t n_conn = std::min<size_t>(a.connections, batches.size());
  std::vector<std::unique_ptr<BitSink>> writers;
  WriteStats total;
  for (size_t t = 0; t < n_conn; ++t) {
    BitWriterOptions wo = BitWriterOptionsFromConfig(config->redis, *redis, *layout);
    if (router) {
      writers.push_back(std::make_unique<ClusterBitWriter>(wo, *ClusterOptionsFrom(*redis)));
    } else {
      writers.push_back(std::make_unique<RedisBitWriter>(wo));
    }
    st = writers.back()->Write(BitBatch{}, &total);
    if (!st.ok()) return Fail(st);
  }
  if (tty)
    std::fprintf(stderr, "bench-redis: writing %zu batches to %s over %zu connection(s)\n",
                 batches.size(), where.c_str(), n_conn);

  // Timed part.
  auto cpu_before = redis_cpu_seconds();
  if (!cpu_before.ok()) return Fail(cpu_before.status());
  const auto start = SC::now();
  std::vector<WriteStats> stats(n_conn);
  std::vector<Status> results(n_conn);
  auto write_share = [&](size_t t) {
    for (size_t i = t; i < batches.size(); i += n_conn) {
      if (StopRequested()) {
        results[t] = Cancelled("stopped after " + std::to_string(i) + " batches");
        return;
      }
      WriteStats s;
      Status ws = writers[t]->Write(batches[i], &s);
      if (!ws.ok()) {
        results[t] = ws.Prefixed("write of batch " + std::to_string(i + 1) + " of " +
                                 std::to_string(batches.size()) + " failed");
        return;
      }
      stats[t] += s;
    }
  };
  {
    std::vector<std::thread> threads;
    for (size_t t = 1; t < n_conn; ++t) threads.emplace_back(write_share, t);
    write_share(0);
    for (auto& th : threads) th.join();
  }
  for (size_t t = 0; t < n_conn; ++t) {
    if (!results[t].ok()) return Fail(results[t]);
    total += stats[t];
  }
  const double seconds = std::chrono::duration<double>(SC::now() - start).count();
  auto cpu_after = redis_cpu_seconds();
  if (!cpu_after.ok()) return Fail(cpu_after.status());

  const double redis_cpu = *cpu_after - *cpu_before;
  const double events = static_cast<double>(a.events);
  const double per_s = seconds > 0 ? 1.0 / seconds : 0;
  const double utilisation = seconds > 0 ? redis_cpu / seconds : 0;
  if (!a.json) {
    std::printf(
        "redis ceiling: %s, write_mode %s, m=%u k=%u, batch %zu events, %zu connection(s)\n",
        where.c_str(), config->redis.write_mode.c_str(), layout->m, layout->k, batch_events,
        n_conn);
    auto row = [](const char* name, const std::string& value) {
      std::printf("  %-24s %16s\n", name, value.c_str());
    };
    char buf[64];
    row("events", Grouped(events));
    if (rejected) row("events rejected", Grouped(static_cast<double>(rejected)));
    row("items", Grouped(static_cast<double>(items)));
    row("batches", Grouped(static_cast<double>(batches.size())));
    row("keys written", Grouped(static_cast<double>(total.keys)));
    if (total.skipped_keys) row("keys skipped", Grouped(static_cast<double>(total.skipped_keys)));
    row("bits", Grouped(static_cast<double>(total.bits)));
    row("commands", Grouped(static_cast<double>(total.commands)));
    std::snprintf(buf, sizeof buf, "%.3f", seconds);
    row("seconds", buf);
    row("events/s", Grouped(events * per_s));
    row("items/s", Grouped(static_cast<double>(items) * per_s));
    row("commands/s", Grouped(static_cast<double>(total.commands) * per_s));
    std::snprintf(buf, sizeof buf, "%.3f", redis_cpu);
    row("redis cpu seconds", buf);
    std::snprintf(buf, sizeof buf, "%.0f%%", 100 * utilisation);
    row("redis cpu utilisation", buf);
  }
  nlohmann::ordered_json j = {
      {"bench", "redis_ceiling"},
      {"events", a.events},
      {"events_rejected", rejected},
      {"items", items},
      {"batches", batches.size()},
      {"batch_events", batch_events},
      {"connections", n_conn},
      {"keys", total.keys},
      {"keys_skipped", total.skipped_keys},
      {"bits", total.bits},
      {"commands", total.commands},
      {"seconds", seconds},
      {"events_per_second", events * per_s},
      {"items_per_second", static_cast<double>(items) * per_s},
      {"commands_per_second", static_cast<double>(total.commands) * per_s},
      {"redis_cpu_seconds", redis_cpu},
      {"redis_cpu_utilisation", utilisation},
      {"redis", where},
      {"write_mode", config->redis.write_mode},
      {"m", layout->m},
      {"k", layout->k},
      {"key_prefix", layout->prefix},
      {"users", a.gen.users},
      {"item_ids", a.gen.items},
      {"zipf", a.gen.zipf_s},
      {"list_size", a.gen.list_size},
      {"list_fraction", a.gen.list_fraction},
      {"spread", a.spread},
      {"seed", a.gen.seed},
  };
  std::printf("%s\n", j.dump().c_str());
  return kExitOk;
}

}  // namespace

Action AddBenchRedisCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench-redis",
      "Measure the Redis ceiling: events/s Redis absorbs with the daemon's exact write pattern "
      "(no Kafka, no decoding in the timed part)");
  auto a = std::make_shared<BenchRedisArgs>();
  a->gen.list_size = 10;
  a->gen.list_fraction = 0.1;
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("-n,--events", a->events, "Events to generate and write")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000000}));
  AddGeneratorOptions(cmd, &a->gen, &a->spread);
  cmd->add_option("--batch", a->batch, "Events per batch (default: pipeline.batch_max_events)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  cmd->add_flag("--json", a->json, "Print only the JSON summary line");
  cmd->add_option("--connections", a->connections,
                  "Redis connections writing batches in parallel (one thread each)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_flag("--allow-existing", a->allow_existing,
                "Write even though the Redis db already has keys with the key prefix");
  return [a] { return BenchRedis(*a); };
}

}  // namespace ef::app
