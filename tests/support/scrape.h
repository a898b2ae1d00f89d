// Reading a daemon's (or serve's, or `lag --serve`'s) Prometheus text in tests.
#pragma once

#include <string>
#include <vector>

namespace ef::test {

// GET http://127.0.0.1:port/metrics; "" when it does not answer 200 within 5 s.
std::string ScrapeText(int port);

// Sum of the samples of metric `name` (exactly that name, labelled or not)
// whose line contains every fragment (e.g. "partition=\"0\""); -1 when no
// sample matches.
double MetricSum(const std::string& text, const std::string& name,
                 const std::vector<std::string>& fragments = {});

// The label sets ("{...}", braces included) of the samples of `name`, in order.
std::vector<std::string> MetricLabelSets(const std::string& text, const std::string& name);

}  // namespace ef::test
