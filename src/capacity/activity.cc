#include "capacity/activity.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

namespace ef {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// FPR of a stage holding x items: (1 - e^(-k x / m))^k.
double StageFpr(const Stage& st, double x) {
  const double fill = -std::expm1(-static_cast<double>(st.k) * x / st.m);
  return std::pow(fill, static_cast<double>(st.k));
}

// The number of stages a user with `items` items per key uses.
uint32_t StagesFor(const std::vector<double>& capacities, double items) {
  const size_t last = capacities.size() - 1;
  size_t s = 0;
  while (s < last && items > capacities[s] * (1 + kStageSlack)) ++s;
  return static_cast<uint32_t>(s + 1);
}

// Parses all of `text` as a finite double; an optional `suffix` is dropped first.
bool ParseNumber(std::string_view text, char suffix, double* out) {
  if (!text.empty() && suffix != '\0' && text.back() == suffix) text.remove_suffix(1);
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size() && std::isfinite(*out);
}

std::string Quote(std::string_view s) { return "'" + std::string(s) + "'"; }

StatusOr<Activity> ParseZipf(std::string_view text, std::string_view exponent) {
  Activity a;
  a.kind = Activity::Kind::kZipf;
  a.classes.clear();
  if (!ParseNumber(exponent, '\0', &a.zipf_s)) {
    return InvalidArgument("zipf exponent " + Quote(exponent) + " in " + Quote(text) +
                           " is not a number");
  }
  if (!(a.zipf_s > 0 && a.zipf_s <= 5)) {
    return InvalidArgument("zipf exponent " + Quote(exponent) + " in " + Quote(text) +
                           " must be in (0, 5]");
  }
  return a;
}

StatusOr<Activity> ParseClasses(std::string_view text) {
  Activity a;
  a.classes.clear();
  double sum = 0;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view part = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t colon = part.find(':');
    if (part.empty()) return InvalidArgument("empty class in " + Quote(text));
    if (colon == std::string_view::npos) {
      return InvalidArgument("class " + Quote(part) +
                             " is not MULTIPLE:PERCENT (or zipf:S for a Zipf distribution)");
    }
    const std::string_view m = part.substr(0, colon), p = part.substr(colon + 1);
    ActivityClass c;
    if (!ParseNumber(m, 'x', &c.multiple)) {
      return InvalidArgument("multiple " + Quote(m) + " in " + Quote(part) + " is not a number");
    }
    if (!(c.multiple > 0 && c.multiple <= 1e6)) {
      return InvalidArgument("multiple " + Quote(m) + " in " + Quote(part) +
                             " must be in (0, 1000000]");
    }
    if (!ParseNumber(p, '%', &c.percent)) {
      return InvalidArgument("share " + Quote(p) + " in " + Quote(part) + " is not a number");
    }
    if (!(c.percent > 0 && c.percent <= 100)) {
      return InvalidArgument("share " + Quote(p) + " in " + Quote(part) +
                             " must be in (0, 100] percent");
    }
    for (const ActivityClass& o : a.classes) {
      if (o.multiple == c.multiple) {
        return InvalidArgument("multiple " + Quote(m) + " appears twice in " + Quote(text));
      }
    }
    sum += c.percent;
    a.classes.push_back(c);
  }
  if (std::fabs(sum - 100) > 1e-6) {
    return InvalidArgument(fmt::format("shares in '{}' sum to {}%, not 100%", text, sum));
  }
  return a;
}

}  // namespace

// Users whose multiple is at most `threshold` in the Zipf model: ranks r with
// ((U + 1) / (2 r))^s <= threshold, i.e. r >= (U + 1) / 2 * threshold^(-1/s).
uint64_t ZipfUsersAtMost(double threshold, double s, uint64_t users) {
  if (std::isinf(threshold)) return users;
  const long double u = static_cast<long double>(users);
  const long double first =
      std::ceil((u + 1) / 2 * std::pow(static_cast<long double>(threshold), -1.0L / s));
  if (first <= 1) return users;
  if (first > u) return 0;
  return users - static_cast<uint64_t>(first) + 1;
}

std::vector<double> StageCapacities(const std::vector<Stage>& stages) {
  std::vector<double> out;
  double sum = 0;
  for (const Stage& st : stages) {
    const double x = st.fill >= st.m ? kInf
                                     : -static_cast<double>(st.m) / st.k *
                                           std::log1p(-static_cast<double>(st.fill) / st.m);
    sum += x;
    out.push_back(sum);
  }
  return out;
}

uint64_t KeyBytes(const std::vector<Stage>& stages, uint32_t stages_used) {
  return ValueBytes(stages, stages_used);
}

UserCost CostOfUser(const std::vector<Stage>& stages, int64_t n0, double multiple,
                    uint32_t buckets) {
  const std::vector<double> cap = StageCapacities(stages);
  const double items = multiple * static_cast<double>(n0);
  UserCost c;
  c.multiple = multiple;
  c.stages_used = StagesFor(cap, items);
  c.at_limit = items > cap.back() * (1 + kStageSlack);
  // Past the limit the last stage stops at its fill and the rest is not written;
  // one stage (v1) takes every item.
  const bool drops = c.at_limit && stages.size() > 1;
  const double written = drops ? cap.back() : items;
  if (drops) {
    c.items_not_written = items - written;
    c.share_not_written = c.items_not_written / items;
  }
  c.bytes_per_key = KeyBytes(stages, c.stages_used);
  double log_miss = 0;  // sum of ln(1 - FPR_s)
  for (uint32_t s = 0; s < c.stages_used; ++s) {
    const double before = s == 0 ? 0 : cap[s - 1];  // items in the stages before s
    const double x = s + 1 < c.stages_used ? cap[s] - before : std::max(0.0, written - before);
    log_miss += std::log1p(-StageFpr(stages[s], x));
  }
  c.bucket_fpr = -std::expm1(log_miss);
  c.window_fpr = -std::expm1(static_cast<double>(buckets) * log_miss);
  return c;
}

std::string Activity::ToString() const {
  if (kind == Kind::kZipf) return fmt::format("zipf:{}", zipf_s);
  std::string out;
  for (const ActivityClass& c : classes) {
    if (!out.empty()) out += ',';
    out += fmt::format("{}:{}", c.multiple, c.percent);
  }
  return out;
}

StatusOr<Activity> ParseActivity(std::string_view text) {
  if (text.empty()) return InvalidArgument("empty: give zipf:S or MULTIPLE:PERCENT,...");
  constexpr std::string_view kZipf = "zipf:";
  if (text.substr(0, kZipf.size()) == kZipf) return ParseZipf(text, text.substr(kZipf.size()));
  return ParseClasses(text);
}

std::vector<uint64_t> ClassUsers(const std::vector<ActivityClass>& classes, uint64_t users) {
  std::vector<uint64_t> out(classes.size(), 0);
  std::vector<long double> rest(classes.size(), 0);
  const long double total =
      std::accumulate(classes.begin(), classes.end(), 0.0L,
                      [](long double s, const ActivityClass& c) { return s + c.percent; });
  if (classes.empty() || total <= 0) return out;
  uint64_t given = 0;
  for (size_t i = 0; i < classes.size(); ++i) {
    const long double exact = static_cast<long double>(users) * classes[i].percent / total;
    long double whole = std::floor(exact);
    if (whole > static_cast<long double>(users - given)) whole = users - given;
    out[i] = static_cast<uint64_t>(whole);
    rest[i] = exact - whole;
    given += out[i];
  }
  // The users left over go one each to the largest remainders (ties: first class).
  std::vector<size_t> order(classes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rest[a] > rest[b]; });
  for (size_t i = 0; given < users; i = (i + 1) % order.size(), ++given) ++out[order[i]];
  return out;
}

ActivityTotals ComputeActivityTotals(const Activity& activity, const std::vector<Stage>& stages,
                                     int64_t n0, uint32_t buckets, uint64_t users) {
  ActivityTotals t;
  t.users = users;
  t.users_by_stages.assign(stages.size(), 0);
  const std::vector<double> cap = StageCapacities(stages);
  const double n = static_cast<double>(n0);
  if (activity.kind == Activity::Kind::kZipf) {
    uint64_t below = 0;
    for (size_t s = 0; s < stages.size(); ++s) {
      const double threshold = s + 1 < stages.size() ? cap[s] * (1 + kStageSlack) / n : kInf;
      const uint64_t at_most = ZipfUsersAtMost(threshold, activity.zipf_s, users);
      t.users_by_stages[s] = at_most - below;
      below = at_most;
    }
    t.users_at_limit =
        users - ZipfUsersAtMost(cap.back() * (1 + kStageSlack) / n, activity.zipf_s, users);
  } else {
    const std::vector<uint64_t> counts = ClassUsers(activity.classes, users);
    for (size_t i = 0; i < counts.size(); ++i) {
      const UserCost c = CostOfUser(stages, n0, activity.classes[i].multiple, buckets);
      t.users_by_stages[c.stages_used - 1] += counts[i];
      if (c.at_limit) t.users_at_limit += counts[i];
    }
  }
  for (size_t s = 0; s < stages.size(); ++s) {
    const uint64_t u = t.users_by_stages[s];
    if (s > 0) t.users_past_stage0 += u;
    t.bytes += static_cast<unsigned __int128>(KeyBytes(stages, static_cast<uint32_t>(s + 1))) *
               buckets * u;
  }
  t.keys = static_cast<unsigned __int128>(users) * buckets;
  return t;
}

}  // namespace ef
