// Feeding Prometheus' rule unit tests (promtool test rules) with what a daemon
// really exposes: series built from scrapes of its /metrics, and the label
// shapes of the series a hand-written promtool test uses.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ef::test {

// input_series entries (YAML lines, indented for `input_series:`) for one
// target: every sample of every scrape in `scrapes`, in order, as Prometheus
// would have stored it scraping `job`/`instance` every interval: each scrape's
// value `repeat` times. A sample absent from a scrape is "_" (no sample) there;
// `absent_before` more "_" come first (the target did not exist yet).
std::string PromtoolInputSeries(const std::vector<std::string>& scrapes, const std::string& job,
                                const std::string& instance, int repeat, int absent_before = 0);

// Metric name -> the sets of label names its series have, in a Prometheus text
// scrape or in the `series: '...'` lines of a promtool test file. `ignore`
// names are left out of every set (e.g. job, instance: added by the scraper).
using LabelShapes = std::map<std::string, std::set<std::set<std::string>>>;
LabelShapes ScrapeShapes(const std::string& text, const std::set<std::string>& ignore);
LabelShapes PromtoolShapes(const std::string& yaml, const std::set<std::string>& ignore);

// `promtool test rules FILE`: exit code and output (stdout and stderr).
struct PromtoolResult {
  int code = -1;
  std::string out;
};
PromtoolResult PromtoolTestRules(const std::string& file);

// The hand-written alert tests (tests/promtool/alerts_test.yml) use series of
// the shape a target exposes: each metric of theirs that `want` selects
// (job and instance left out) is checked, with Catch (REQUIRE the metric,
// CHECK each label set), against `scrape`, that target's /metrics text.
// Returns how many metrics were checked.
size_t CheckAlertTestShapes(const std::string& scrape,
                            const std::function<bool(const std::string&)>& want);

}  // namespace ef::test
