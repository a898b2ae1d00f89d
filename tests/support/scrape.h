// Reading a daemon's (or serve's, or `lag --serve`'s) Prometheus text in tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace ef::test {

struct HttpReply {
  int status = 0;  // 0: no answer
  std::string body;
};
// GET http://127.0.0.1:port<path>, waiting at most 2 s to connect and 5 s to read.
HttpReply HttpGet(int port, const std::string& path);

// One sample of a Prometheus text exposition: name{labels} value.
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value_text;  // as written: "12", "+Inf", "NaN"
  double value = 0;
};
// Every sample of `text` (comments and blank lines skipped).
std::vector<PromSample> ParseProm(const std::string& text);

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
