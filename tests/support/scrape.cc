#include "support/scrape.h"

#include <httplib.h>

#include <regex>
#include <sstream>

namespace ef::test {
namespace {

// The sample line's name matches `name` exactly (not a longer name, not a comment).
bool IsSampleOf(const std::string& line, const std::string& name) {
  return line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
         (line[name.size()] == '{' || line[name.size()] == ' ');
}

}  // namespace

HttpReply HttpGet(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto r = c.Get(path.c_str());
  if (!r) return {};
  return {r->status, r->body};
}

std::string ScrapeText(int port) {
  HttpReply r = HttpGet(port, "/metrics");
  return r.status == 200 ? r.body : "";
}

std::vector<PromSample> ParseProm(const std::string& text) {
  static const std::regex kLine(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)")re");
  std::vector<PromSample> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    if (!std::regex_match(line, m, kLine)) continue;
    PromSample s;
    s.name = m[1];
    const std::string labels = m[3];
    for (std::sregex_iterator it(labels.begin(), labels.end(), kLabel), end; it != end; ++it)
      s.labels[(*it)[1]] = (*it)[2];
    s.value_text = m[4];
    s.value = std::stod(s.value_text);
    out.push_back(std::move(s));
  }
  return out;
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
