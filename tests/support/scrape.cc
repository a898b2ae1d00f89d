#include "support/scrape.h"

#include <httplib.h>

#include <sstream>

namespace ef::test {
namespace {

// The sample line's name matches `name` exactly (not a longer name, not a comment).
bool IsSampleOf(const std::string& line, const std::string& name) {
  return line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
         (line[name.size()] == '{' || line[name.size()] == ' ');
}

}  // namespace

std::string ScrapeText(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return "";
  return r->body;
}

double MetricSum(const std::string& text, const std::string& name,
                 const std::vector<std::string>& fragments) {
  double sum = 0;
  bool any = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!IsSampleOf(line, name)) continue;
    bool all = true;
    for (const auto& f : fragments) all &= line.find(f) != std::string::npos;
    if (!all) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
    any = true;
  }
  return any ? sum : -1;
}

std::vector<std::string> MetricLabelSets(const std::string& text, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!IsSampleOf(line, name)) continue;
    const size_t open = line.find('{');
    const size_t close = line.rfind('}');
    out.push_back(open == name.size() && close != std::string::npos
                      ? line.substr(open, close - open + 1)
                      : "");
  }
  return out;
}

}  // namespace ef::test
