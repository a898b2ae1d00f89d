#include "capacity/size_report.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>

#include "bloom/layout.h"
#include "bloom/size_classes.h"
#include "common/duration.h"

namespace ef {
namespace {

// Totals in 128 bits: bytes per key < 2^29 + 64, B < 2^32 and users < 2^64,
// so every product is below 2^126 and none can overflow or saturate.
using U128 = unsigned __int128;
constexpr U128 kU64Max = std::numeric_limits<uint64_t>::max();

struct Totals {
  uint64_t per_bucket;
  uint64_t per_window;
  U128 total;
  U128 total_with_overhead;
};

Totals ComputeTotals(const Sizing& s, uint64_t users) {
  Totals t;
  t.per_bucket = s.bytes_per_bucket;
  t.per_window = s.bytes_per_window;
  t.total = U128{t.per_window} * users;
  t.total_with_overhead = (U128{t.per_bucket} + kRedisKeyOverheadBytes) * s.buckets * users;
  return t;
}

U128 WithOverhead(const ActivityTotals& a) { return a.bytes + a.keys * kRedisKeyOverheadBytes; }

std::string Decimal(U128 v) {
  if (v == 0) return "0";
  std::string out;
  for (; v > 0; v /= 10) out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
  return std::string(out.rbegin(), out.rend());
}

// 1234567 -> "1,234,567": totals run to 12+ digits and must be readable at a glance.
std::string Grouped(U128 v) {
  const std::string digits = Decimal(v);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string BytesHuman(U128 bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB", "GiB", "TiB",
                                           "PiB", "EiB", "ZiB", "YiB"};
  if (bytes < 1024) return fmt::format("{} B", static_cast<uint64_t>(bytes));
  long double v = static_cast<long double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0L && unit + 1 < std::size(kUnits)) {
    v /= 1024.0L;
    ++unit;
  }
  return fmt::format("{:.1f} {}", static_cast<double>(v), kUnits[unit]);
}

// A JSON number when the total fits the 64 bits JSON readers can hold, else null.
nlohmann::json JsonBytes(U128 bytes) {
  return bytes <= kU64Max ? nlohmann::json(static_cast<uint64_t>(bytes)) : nlohmann::json(nullptr);
}

// Durations come from validated config, but the report must not overflow on
// any input.
std::string SecondsText(int64_t seconds) {
  if (seconds > std::numeric_limits<int64_t>::max() / 1000 || seconds < 0) {
    return std::to_string(seconds) + "s";
  }
  return FormatDurationMs(seconds * 1000);
}

std::string Percent(double p) { return fmt::format("{:.4g}%", p * 100.0); }

double Share(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

std::vector<UserCost> ActivityTable(const SizeReportInput& in) {
  std::vector<UserCost> out;
  if (in.stages.empty()) return out;
  for (double x : kActivityTableMultiples) {
    out.push_back(CostOfUser(in.stages, in.items_per_bucket, x, in.sizing.buckets));
  }
  return out;
}

// The note of an activity table row past the stage limit: the share of the
// user's items that a writer does not write (rule 8), or with one stage (v1)
// that every item is written.
std::string PastLimitNote(const UserCost& c, size_t stages) {
  if (!c.at_limit) return "";
  if (stages == 1) return "  (past the stage limit: one stage, every item written)";
  return fmt::format("  (past the stage limit: {:.3g}% of its items not written)",
                     c.share_not_written * 100);
}

std::string ActivityDefinition(const Activity& a) {
  if (a.kind == Activity::Kind::kZipf) {
    return fmt::format(
        "user of rank r of U at ((U+1)/(2r))^{} x items_per_bucket; median user at 1x", a.zipf_s);
  }
  return "MULTIPLE x items_per_bucket : PERCENT of the users";
}

// The v4 rows of kActivityTableMultiples (in.classes non-empty).
std::vector<ClassedCost> V4Table(const SizeReportInput& in) {
  std::vector<ClassedCost> out;
  for (double x : kActivityTableMultiples)
    out.push_back(CostOfUserV4(in.classes, in.items_per_bucket, x, in.sizing.buckets));
  return out;
}

// The v4 block of the text report (empty without classes).
std::string FormatV4(const SizeReportInput& in) {
  if (in.classes.empty()) return "";
  std::string out = fmt::format(
      "\nLayout v4 (docs/FORMAT.md rule 11: a size class per key), activity {}, if each "
      "user's activity persists from day to day\n",
      in.activity.ToString());
  auto line = [&out](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "  {:<28}{}\n", label, value);
  };
  line("user at",
       fmt::format("{:<16}{:<9}{:<13}{}", "class", "stages", "bytes/key", "FPR per key"));
  for (const ClassedCost& c : V4Table(in)) {
    line(fmt::format("{:g}x items_per_bucket", c.cost.multiple),
         fmt::format(
             "{:<16}{:<9}{:<13}{}",
             fmt::format("{} ({} B)", c.size_class, SizeClassBytes(c.size_class)),
             fmt::format("{} of {}", c.cost.stages_used, in.classes.tables[c.size_class].size()),
             Grouped(c.cost.bytes_per_key), Percent(c.cost.bucket_fpr)));
  }
  const ActivityTotals a = ComputeActivityTotalsV4(in.activity, in.classes, in.items_per_bucket,
                                                   in.sizing.buckets, in.users);
  const U128 with_overhead = WithOverhead(a);
  line("total for all users", fmt::format("{} bytes ({})", Grouped(a.bytes), BytesHuman(a.bytes)));
  line("with Redis key overhead",
       fmt::format("{} bytes ({})", Grouped(with_overhead), BytesHuman(with_overhead)));
  return out;
}

nlohmann::json V4Json(const SizeReportInput& in) {
  nlohmann::json table = nlohmann::json::array();
  for (const ClassedCost& c : V4Table(in)) {
    table.push_back({{"multiple", c.cost.multiple},
                     {"class", c.size_class},
                     {"class_bytes", SizeClassBytes(c.size_class)},
                     {"stages", c.cost.stages_used},
                     {"bytes_per_key", c.cost.bytes_per_key},
                     {"bucket_fpr", c.cost.bucket_fpr},
                     {"window_fpr", c.cost.window_fpr}});
  }
  const ActivityTotals a = ComputeActivityTotalsV4(in.activity, in.classes, in.items_per_bucket,
                                                   in.sizing.buckets, in.users);
  const U128 with_overhead = WithOverhead(a);
  nlohmann::json act{{"users_past_stage0", a.users_past_stage0},
                     {"users_at_limit", a.users_at_limit},
                     {"total_bytes", JsonBytes(a.bytes)},
                     {"total_human", BytesHuman(a.bytes)},
                     {"total_bytes_with_key_overhead", JsonBytes(with_overhead)},
                     {"total_with_key_overhead_human", BytesHuman(with_overhead)}};
  return {{"activity_table", std::move(table)}, {"activity", std::move(act)}};
}

}  // namespace

std::string FormatBytesHuman(uint64_t bytes) { return BytesHuman(bytes); }

namespace {

// The fields of every input, with no stage table yet.
SizeReportInput BaseInput(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                          int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  SizeReportInput in;
  in.sizing = sizing;
  in.items_per_bucket = items_per_bucket;
  in.fpr = fpr;
  in.window_seconds = window_seconds;
  in.bucket_seconds = bucket_seconds;
  in.users = users;
  return in;
}

}  // namespace

StatusOr<SizeReportInput> SizeReportInputFromConfig(const FilterConfig& f, uint64_t users) {
  auto sizing = ComputeSizing(f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds);
  if (!sizing.ok()) return sizing.status();
  auto layout = LayoutFromConfig(f);
  if (!layout.ok()) return layout.status();
  SizeReportInput in =
      BaseInput(*sizing, f.items_per_bucket, f.fpr, f.window_seconds, f.bucket_seconds, users);
  in.version = layout->version();
  if (layout->v3) {
    Layout v4 = *layout;
    v4.v4 = true;
    if (v4.Finish().ok()) in.classes = {v4.Params(), std::move(v4.class_tables)};
  }
  in.stages = std::move(layout->stage_table);
  in.growth = layout->growth;
  in.k_step = layout->k_step;
  return in;
}

SizeReportInput SingleStageInput(const Sizing& sizing, int64_t items_per_bucket, double fpr,
                                 int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  SizeReportInput in =
      BaseInput(sizing, items_per_bucket, fpr, window_seconds, bucket_seconds, users);
  // The stage table of the one-stage layout these m and k make (Layout::Finish).
  Layout single;
  single.m = sizing.m;
  single.k = sizing.k;
  single.stages = 1;
  single.fill_ppm = DesignFillPpm(sizing.m, sizing.k, items_per_bucket);
  if (sizing.m > 0 && sizing.k > 0 && single.Finish().ok())
    in.stages = std::move(single.stage_table);
  return in;
}

std::string FormatSizeReport(const SizeReportInput& in) {
  const Sizing& s = in.sizing;
  const Totals t = ComputeTotals(s, in.users);
  const int version = in.version;
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    fmt::format_to(std::back_inserter(out), "  {:<28}{}\n", label, value);
  };
  fmt::format_to(std::back_inserter(out), "exposure-filter sizing (bit-layout contract v{})\n",
                 version);
  out += "\nInputs\n";
  line("items per user per bucket", Grouped(static_cast<uint64_t>(in.items_per_bucket)));
  line("target FPR over window", fmt::format("{} ({:g})", Percent(in.fpr), in.fpr));
  line("window", SecondsText(in.window_seconds));
  line("bucket", SecondsText(in.bucket_seconds));
  line("users", Grouped(in.users));
  out += "\nLayout\n";
  line("buckets per query (B)", fmt::format("{}  (window / bucket + 1)", s.buckets));
  line("m, bits per bucket key", Grouped(s.m));
  line("k, hash positions", std::to_string(s.k));
  if (in.stages.size() > 1) {
    line("stage limit", fmt::format("{} stages (growth {}, k_step {}; stage 0 is the above)",
                                    in.stages.size(), in.growth, in.k_step));
    const double cap = StageCapacities(in.stages).back();
    line("stage limit reached at",
         std::isinf(cap) ? std::string("never (the last stage never fills)")
                         : fmt::format("{:.1f}x items_per_bucket",
                                       cap / static_cast<double>(in.items_per_bucket)));
  } else if (!in.stages.empty()) {
    line("stage limit",
         version == 1 ? "1 stage (layout v1: filter.stages = 1)" : "1 stage (filter.stages = 1)");
  }
  line("target FPR per bucket", fmt::format("{} ({:.6g})", Percent(s.bucket_fpr), s.bucket_fpr));
  line("expected FPR per bucket",
       fmt::format("{} ({:.6g})", Percent(s.expected_bucket_fpr), s.expected_bucket_fpr));
  line("expected FPR over window",
       fmt::format("{} ({:.6g})", Percent(s.expected_window_fpr), s.expected_window_fpr));
  out += "\nMemory (every user at 1x and active in every bucket: an upper bound)\n";
  line("per user per bucket",
       fmt::format("{} bytes ({})", Grouped(t.per_bucket), FormatBytesHuman(t.per_bucket)));
  line("per user per window",
       fmt::format("{} bytes ({})", Grouped(t.per_window), FormatBytesHuman(t.per_window)));
  line("total for all users", fmt::format("{} bytes ({})", Grouped(t.total), BytesHuman(t.total)));
  line("with Redis key overhead", fmt::format("{} bytes ({})", Grouped(t.total_with_overhead),
                                              BytesHuman(t.total_with_overhead)));

  const std::vector<UserCost> table = ActivityTable(in);
  if (!table.empty()) {
    out += "\nUsers by activity (per bucket key; x items_per_bucket; expected, see *)\n";
    line("user at", fmt::format("{:<9}{:<13}{:<14}{}", "stages", "bytes/key", "FPR per key",
                                "FPR over window"));
    for (const UserCost& c : table) {
      line(fmt::format("{:g}x items_per_bucket", c.multiple),
           fmt::format("{:<9}{:<13}{:<14}{}{}",
                       fmt::format("{} of {}", c.stages_used, in.stages.size()),
                       Grouped(c.bytes_per_key), Percent(c.bucket_fpr), Percent(c.window_fpr),
                       PastLimitNote(c, in.stages.size())));
    }
  }

  if (in.activity_given && !in.stages.empty()) {
    const ActivityTotals a =
        ComputeActivityTotals(in.activity, in.stages, in.items_per_bucket, s.buckets, in.users);
    const U128 with_overhead = WithOverhead(a);
    fmt::format_to(std::back_inserter(out), "\nActivity {} ({})\n", in.activity.ToString(),
                   ActivityDefinition(in.activity));
    line("users past stage 0", fmt::format("{} ({})", Grouped(a.users_past_stage0),
                                           Percent(Share(a.users_past_stage0, a.users))));
    line("users at the stage limit", fmt::format("{} ({})", Grouped(a.users_at_limit),
                                                 Percent(Share(a.users_at_limit, a.users))));
    line("per user per window (mean)",
         fmt::format("{} bytes", Grouped(a.users == 0 ? 0 : a.bytes / a.users)));
    line("total for all users",
         fmt::format("{} bytes ({})", Grouped(a.bytes), BytesHuman(a.bytes)));
    line("with Redis key overhead",
         fmt::format("{} bytes ({})", Grouped(with_overhead), BytesHuman(with_overhead)));
  }

  out += FormatV4(in);
  fmt::format_to(std::back_inserter(out),
                 "\nRedis adds ~50-90 bytes of overhead per key (estimated here as {} bytes "
                 "x {} keys per user).\n",
                 kRedisKeyOverheadBytes, s.buckets);
  if (!table.empty()) {
    out += "* Ideal model (stage s full at its design fill, FPR (1-e^(-k_s x/m_s))^k_s)";
    // Rule 2's floor (docs/FORMAT.md "Known limit"); rule 9 (v3) has none.
    if (version < 3)
      out += "; measured rates near 1x run somewhat higher with small m (rule 2's floor)";
    out +=
        ". Past the stage limit the last stage stops at its fill: the items past it are not "
        "written (they may read as unseen) and the FPR stays at the limit's.\n";
  }
  return out;
}

namespace {

// The "activity" object of SizeReportJson.
nlohmann::json ActivityJson(const SizeReportInput& in) {
  const Sizing& s = in.sizing;
  const ActivityTotals a =
      ComputeActivityTotals(in.activity, in.stages, in.items_per_bucket, s.buckets, in.users);
  const U128 with_overhead = WithOverhead(a);
  nlohmann::json act{
      {"spec", in.activity.ToString()},
      {"kind", in.activity.kind == Activity::Kind::kZipf ? "zipf" : "classes"},
      {"users_by_stages", a.users_by_stages},
      {"users_past_stage0", a.users_past_stage0},
      {"share_past_stage0", Share(a.users_past_stage0, a.users)},
      {"users_at_limit", a.users_at_limit},
      {"share_at_limit", Share(a.users_at_limit, a.users)},
      {"total_bytes", JsonBytes(a.bytes)},
      {"total_human", BytesHuman(a.bytes)},
      {"total_bytes_with_key_overhead", JsonBytes(with_overhead)},
      {"total_with_key_overhead_human", BytesHuman(with_overhead)},
      {"total_bytes_exceeds_64_bits", with_overhead > kU64Max},
  };
  if (in.activity.kind == Activity::Kind::kZipf) {
    act["zipf_s"] = in.activity.zipf_s;
  } else {
    const std::vector<uint64_t> users = ClassUsers(in.activity.classes, in.users);
    nlohmann::json classes = nlohmann::json::array();
    for (size_t i = 0; i < users.size(); ++i) {
      const ActivityClass& c = in.activity.classes[i];
      const UserCost cost = CostOfUser(in.stages, in.items_per_bucket, c.multiple, s.buckets);
      classes.push_back({{"multiple", c.multiple},
                         {"percent", c.percent},
                         {"users", users[i]},
                         {"stages", cost.stages_used},
                         {"at_limit", cost.at_limit},
                         {"share_not_written", cost.share_not_written},
                         {"bytes_per_key", cost.bytes_per_key}});
    }
    act["classes"] = std::move(classes);
  }
  return act;
}

}  // namespace

nlohmann::json SizeReportJson(const SizeReportInput& in) {
  const Sizing& s = in.sizing;
  const Totals t = ComputeTotals(s, in.users);
  const int version = in.version;
  nlohmann::json j{
      {"contract_version", version},
      {"items_per_bucket", in.items_per_bucket},
      {"fpr", in.fpr},
      {"window_seconds", in.window_seconds},
      {"bucket_seconds", in.bucket_seconds},
      {"window", SecondsText(in.window_seconds)},
      {"bucket", SecondsText(in.bucket_seconds)},
      {"users", in.users},
      {"m", s.m},
      {"k", s.k},
      {"buckets", s.buckets},
      {"bucket_fpr_target", s.bucket_fpr},
      {"bucket_fpr_expected", s.expected_bucket_fpr},
      {"window_fpr_expected", s.expected_window_fpr},
      {"bytes_per_user_per_bucket", t.per_bucket},
      {"bytes_per_user_per_window", t.per_window},
      {"total_bytes", JsonBytes(t.total)},
      {"total_human", BytesHuman(t.total)},
      {"redis_key_overhead_bytes_per_key", kRedisKeyOverheadBytes},
      {"total_bytes_with_key_overhead", JsonBytes(t.total_with_overhead)},
      {"total_with_key_overhead_human", BytesHuman(t.total_with_overhead)},
      {"total_bytes_exceeds_64_bits", t.total_with_overhead > kU64Max},
  };
  if (in.stages.empty()) return j;

  j["stage_limit"] = in.stages.size();
  const bool staged = in.stages.size() > 1;
  j["growth"] = staged ? nlohmann::json(in.growth) : nlohmann::json(nullptr);
  j["k_step"] = staged ? nlohmann::json(in.k_step) : nlohmann::json(nullptr);
  const std::vector<double> cap = StageCapacities(in.stages);
  nlohmann::json stages = nlohmann::json::array();
  for (size_t i = 0; i < in.stages.size(); ++i) {
    const Stage& st = in.stages[i];
    stages.push_back({{"stage", i},
                      {"m", st.m},
                      {"k", st.k},
                      {"offset_bits", st.offset},
                      {"fill_bits", st.fill},
                      {"cumulative_capacity_items",
                       std::isinf(cap[i]) ? nlohmann::json(nullptr) : nlohmann::json(cap[i])}});
  }
  j["stage_table"] = std::move(stages);

  nlohmann::json table = nlohmann::json::array();
  for (const UserCost& c : ActivityTable(in)) {
    table.push_back({{"multiple", c.multiple},
                     {"items_per_bucket", c.multiple * static_cast<double>(in.items_per_bucket)},
                     {"stages", c.stages_used},
                     {"at_limit", c.at_limit},
                     {"items_not_written", c.items_not_written},
                     {"share_not_written", c.share_not_written},
                     {"bytes_per_key", c.bytes_per_key},
                     {"bucket_fpr", c.bucket_fpr},
                     {"window_fpr", c.window_fpr}});
  }
  j["activity_table"] = std::move(table);

  j["activity"] = ActivityJson(in);
  if (!in.classes.empty()) j["v4_persistent"] = V4Json(in);
  return j;
}

std::string FormatSizeReport(const Sizing& s, int64_t items_per_bucket, double fpr,
                             int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  return FormatSizeReport(
      SingleStageInput(s, items_per_bucket, fpr, window_seconds, bucket_seconds, users));
}

nlohmann::json SizeReportJson(const Sizing& s, int64_t items_per_bucket, double fpr,
                              int64_t window_seconds, int64_t bucket_seconds, uint64_t users) {
  return SizeReportJson(
      SingleStageInput(s, items_per_bucket, fpr, window_seconds, bucket_seconds, users));
}

}  // namespace ef
