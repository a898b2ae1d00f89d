// exposure-filter check: which of a user's candidate items were seen.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/common.h"
#include "bloom/keys.h"
#include "bloom/layout.h"
#include "common/clock.h"
#include "common/time_arg.h"
#include "exposure_filter/client.h"
#include "redis/options.h"

namespace ef::app {
namespace {

struct CheckArgs {
  ConfigArgs config;
  std::string user;
  std::vector<std::string> items;
  std::string file;  // --file: candidates one per line ("-" = stdin)
  bool json = false;
  bool only_unseen = false;
  std::string at;            // --at: a time (common/time_arg.h); "" = now
  bool mark_served = false;  // --mark-served: mark the unseen items served (issue 30)
  uint64_t page = 0;         // --page N: mark only the first N of them; 0 = all
  // --cluster ITEM=CLUSTER: an item's near-duplicate cluster (docs/CONTENT.md
  // rule 5); items without one are looked up in the content map.
  std::vector<std::string> clusters;
};

// Candidates one per line from `in` (a trailing CR is dropped; empty lines skipped).
void ReadItems(std::istream& in, std::vector<std::string>* items) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) items->push_back(line);
  }
}

int Check(CheckArgs& a) {
  auto config = LoadOrReport(a.config);
  if (!config.ok()) return kExitConfig;
  // --at first: a bad time is named before anything is read.
  int64_t at_s = 0;  // 0 = now
  if (!a.at.empty()) {
    auto at_ms = ParseTimeArg(a.at, SystemClock().NowMs());
    if (!at_ms.ok()) return Fail(at_ms.status().Prefixed("--at"), kExitUsage);
    // The client reads 0 seconds as "now": the first second of 1970 is no query time.
    if (*at_ms < 1000)
      return Fail(InvalidArgument("--at " + a.at + ": must be after 1970-01-01T00:00:00Z"),
                  kExitUsage);
    at_s = *at_ms / 1000;
  }
  // A user ID with no valid key (docs/FORMAT.md rule 4) is a usage error, named
  // before anything is read, not an "unseen" answer.
  if (Status st = CheckUserId(a.user); !st.ok()) {
    return Fail(InvalidArgument("--user: " + st.message()), kExitUsage);
  }
  if (!a.file.empty()) {
    if (a.file == "-") {
      ReadItems(std::cin, &a.items);
    } else {
      std::ifstream in(a.file);
      if (!in) return Fail(InvalidArgument("--file " + a.file + ": cannot open"), kExitUsage);
      ReadItems(in, &a.items);
    }
  } else if (a.items.empty()) {
    // Items from stdin, one per line, when none are given as arguments.
    ReadItems(std::cin, &a.items);
  }
  if (a.items.empty())
    return Fail(InvalidArgument("no items: give them as arguments, with --file or on stdin"),
                kExitUsage);
  // --cluster ITEM=CLUSTER, per candidate ("" = look it up in the content map).
  std::vector<std::string> item_clusters;
  if (!a.clusters.empty()) {
    if (!config->filter.near_duplicates)
      return Fail(InvalidArgument("--cluster: needs filter.near_duplicates: true (--set "
                                  "filter.near_duplicates=true)"),
                  kExitUsage);
    item_clusters.assign(a.items.size(), std::string());
    for (const std::string& arg : a.clusters) {
      const size_t eq = arg.rfind('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
        return Fail(InvalidArgument("--cluster " + arg + ": expected ITEM=CLUSTER"), kExitUsage);
      const std::string item = arg.substr(0, eq);
      bool found = false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (a.items[i] != item) continue;
        item_clusters[i] = arg.substr(eq + 1);
        found = true;
      }
      if (!found)
        return Fail(InvalidArgument("--cluster " + arg + ": " + item + " is not a candidate item"),
                    kExitUsage);
    }
  }
  auto layout = LayoutFromConfig(config->filter);
  if (!layout.ok()) return Fail(layout.status(), kExitConfig);
  if (auto options = RedisOptionsFromConfig(config->redis); !options.ok())
    return Fail(options.status(), kExitConfig);

  // The library a recall service uses (include/exposure_filter/client.h), with the
  // CLI's patience: redis.command_timeout per call, and errors, not fail-open.
  exposure_filter::ClientOptions options;
  options.config_path = a.config.path;
  options.overrides = a.config.overrides;
  options.pool_size = 1;
  options.timeout = std::chrono::milliseconds(config->redis.command_timeout_ms);
  options.on_error = exposure_filter::OnError::kFailClosed;
  options.allow_missing_layout = true;
  std::string error;
  exposure_filter::ErrorCode code = exposure_filter::ErrorCode::kOk;
  auto client = exposure_filter::Client::Create(options, &error, &code);
  if (!client) return Fail(Unavailable(error), ExitCodeForClientError(code));
  if (!client->layout().stored)
    std::fprintf(stderr,
                 "exposure-filter: note: no layout stored at %s yet: nothing was written "
                 "with this prefix\n",
                 MetaKey(layout->prefix).c_str());
  exposure_filter::CallOptions call;
  call.at_unix_seconds = at_s;
  call.with_buckets = true;
  // --mark-served: the read, then the unseen items (the first --page of them)
  // marked served in the user's served ring (docs/FORMAT.md rule 10).
  std::vector<std::string_view> views(a.items.begin(), a.items.end());
  std::vector<std::string_view> cluster_views(item_clusters.begin(), item_clusters.end());
  const exposure_filter::Result result =
      a.mark_served ? client->FilterAndMarkWithClusters(a.user, views, cluster_views,
                                                        a.page > 0 ? a.page : SIZE_MAX, call)
                    : client->SeenWithClusters(a.user, views, cluster_views, call);
  if (!result.ok) return Fail(Unavailable(result.error), ExitCodeForClientError(result.code));
  // The live buckets and the next one (rule 6: clock skew between writer and reader).
  const size_t buckets_read = result.buckets_read;

  const size_t seen = result.seen_count;
  // Marked now (--mark-served): result.marked, sized only by FilterAndMark.
  auto marked = [&](size_t i) { return a.mark_served && result.marked[i]; };
  if (a.json) {
    nlohmann::json j;
    j["user"] = a.user;
    j["buckets_checked"] = buckets_read;
    j["buckets_present"] = result.buckets_present;
    j["seen"] = nlohmann::json::array();
    j["unseen"] = nlohmann::json::array();
    // "served" (and "marked") only when there is something to say, so that the
    // answer for a user without a served ring stays what it was.
    const bool with_served = result.served_count > 0 || a.mark_served;
    if (with_served) j["served"] = nlohmann::json::array();
    if (a.mark_served) j["marked"] = nlohmann::json::array();
    // "near_duplicates" only when some item is one (filter.near_duplicates).
    if (result.near_duplicate_count > 0) j["near_duplicates"] = nlohmann::json::array();
    for (size_t i = 0; i < a.items.size(); ++i) {
      if (result.near_duplicate[i]) {
        j["near_duplicates"].push_back({{"item", a.items[i]}, {"cluster", result.cluster[i]}});
        continue;
      }
      j[result.seen[i] ? "seen" : result.served[i] ? "served" : "unseen"].push_back(a.items[i]);
      if (marked(i)) j["marked"].push_back(a.items[i]);
    }
    std::printf("%s\n", j.dump().c_str());
    return kExitOk;
  }
  for (size_t i = 0; i < a.items.size(); ++i) {
    if (a.only_unseen) {
      // With --mark-served: the items it marked (with --page N, the page).
      const bool print = a.mark_served
                             ? marked(i)
                             : !result.seen[i] && !result.served[i] && !result.near_duplicate[i];
      if (print) std::printf("%s\n", a.items[i].c_str());
      continue;
    }
    if (result.seen[i]) {
      std::printf("seen    %s  (bucket %s)\n", a.items[i].c_str(),
                  FormatBucket(result.seen_bucket[i], layout->bucket_seconds).c_str());
    } else if (result.near_duplicate[i]) {
      std::printf("near-duplicate  %s  (cluster %s)\n", a.items[i].c_str(),
                  result.cluster[i].c_str());
    } else if (result.served[i]) {
      std::printf("served  %s\n", a.items[i].c_str());
    } else if (marked(i)) {
      std::printf("unseen  %s  (marked served)\n", a.items[i].c_str());
    } else {
      std::printf("unseen  %s\n", a.items[i].c_str());
    }
  }
  std::fflush(stdout);
  if (!a.only_unseen) {
    std::string served_note;
    if (result.served_count > 0 || a.mark_served)
      served_note = ", " + std::to_string(result.served_count) + " served recently";
    if (a.mark_served) served_note += ", " + std::to_string(result.marked_count) + " marked served";
    if (result.near_duplicate_count > 0)
      served_note += ", " + std::to_string(result.near_duplicate_count) + " near duplicate(s)";
    std::fprintf(stderr, "%zu of %zu item(s) seen by user %s%s (%zu of %zu bucket(s) present)\n",
                 seen, a.items.size(), a.user.c_str(), served_note.c_str(), result.buckets_present,
                 buckets_read);
  }
  return kExitOk;
}

}  // namespace

Action AddCheckCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "check", "Tell which candidate items a user has seen (reads all live buckets in one MGET)");
  auto a = std::make_shared<CheckArgs>();
  AddConfigOptions(cmd, &a->config, false);
  cmd->add_option("-u,--user", a->user, "User ID")->required();
  cmd->add_option("items", a->items, "Candidate item IDs (default: one per line on stdin)");
  cmd->add_option("--file", a->file,
                  "Read candidate item IDs from this file, one per line (- = stdin)");
  cmd->add_flag("--json", a->json,
                "Print {\"seen\": [...], \"unseen\": [...]} as JSON (plus \"served\": [...] when "
                "some item was served recently, and \"marked\": [...] with --mark-served)");
  cmd->add_flag(
      "--unseen", a->only_unseen,
      "Print only the unseen items (neither seen nor served recently), one per line; with "
      "--mark-served, the ones it marked (with --page N: the page)");
  auto* at = cmd->add_option("--at", a->at,
                             "Query as of this time: RFC 3339 (2026-11-22T08:00:00Z), a date, "
                             "@epoch seconds, or a duration ago (2h); default now")
                 ->type_name("TIME");
  auto* mark = cmd->add_flag("--mark-served", a->mark_served,
                             "Mark the unseen items served (a pseudo-exposure: the user's served "
                             "ring, serve.served_ttl), so that the next check or page leaves them "
                             "out until their exposure events arrive; see --page")
                   ->excludes(at);
  cmd->add_option("--cluster", a->clusters,
                  "With filter.near_duplicates: ITEM=CLUSTER, the near-duplicate cluster of a "
                  "candidate item (repeatable); the others are looked up in the content map")
      ->type_name("ITEM=CLUSTER")
      ->allow_extra_args(false);  // one value per --cluster: the items stay positional
  cmd->add_option("--page", a->page,
                  "With --mark-served: mark only the first N unseen items, in input order (a "
                  "page of N); default all of them")
      ->type_name("N")
      ->check(WholeNumber(1, UINT32_MAX))
      ->needs(mark);
  cmd->footer(
      "Each item is printed as seen (an exposure event, with its bucket), near-duplicate\n"
      "(filter.near_duplicates: an item of its content cluster was seen), served (marked\n"
      "served recently: --mark-served, serve's mark_served or POST /v1/served) or unseen.\n"
      "Example, two pages of 10 from one candidate list:\n"
      "  exposure-filter check -u alice --file candidates.txt --mark-served --page 10 --unseen\n"
      "  exposure-filter check -u alice --file candidates.txt --mark-served --page 10 --unseen");
  return [a] { return Check(*a); };
}

}  // namespace ef::app
