#include "support/promtool.h"

#include <regex>
#include <sstream>

#include "support/process.h"

namespace ef::test {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// `name{a="x",b="y"} value` (values of ours never hold '"' or ','); false for
// comments and blank lines.
bool ParseSample(const std::string& line, Sample* s) {
  static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+))");
  static const std::regex label(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)")re");
  std::smatch m;
  if (!std::regex_search(line, m, sample)) return false;
  s->name = m[1].str();
  s->value = m[4].str();
  s->labels.clear();
  const std::string inner = m[3].str();
  for (auto it = std::sregex_iterator(inner.begin(), inner.end(), label);
       it != std::sregex_iterator(); ++it)
    s->labels[(*it)[1].str()] = (*it)[2].str();
  return true;
}

std::string SeriesKey(const Sample& s) {
  std::string key = s.name + "{";
  bool first = true;
  for (const auto& [k, v] : s.labels) {
    if (v.empty()) continue;  // Prometheus drops empty labels
    if (!first) key += ",";
    first = false;
    key += k + "=\"" + v + "\"";
  }
  return key + "}";
}

void AddShape(const Sample& s, const std::set<std::string>& ignore, LabelShapes* out) {
  std::set<std::string> names;
  for (const auto& [k, v] : s.labels)
    if (!v.empty() && !ignore.count(k)) names.insert(k);
  (*out)[s.name].insert(names);
}

}  // namespace

std::string PromtoolInputSeries(const std::vector<std::string>& scrapes, const std::string& job,
                                const std::string& instance, int repeat, int absent_before) {
  // series key -> its value in each scrape ("" = absent)
  std::map<std::string, std::vector<std::string>> values;
  for (size_t i = 0; i < scrapes.size(); ++i) {
    std::istringstream in(scrapes[i]);
    Sample s;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#' || !ParseSample(line, &s)) continue;
      s.labels["job"] = job;
      s.labels["instance"] = instance;
      auto& v = values[SeriesKey(s)];
      v.resize(scrapes.size());
      v[i] = s.value == "+Inf" ? "Inf" : s.value == "-Inf" ? "-Inf" : s.value;
    }
  }
  std::string out;
  for (const auto& [key, vals] : values) {
    std::string series;
    // promtool's expanding notation: "_xN" is N missing samples, "VxN" is N+1 samples of V.
    if (absent_before > 0) series += "_x" + std::to_string(absent_before);
    for (const auto& v : vals) {
      if (!series.empty()) series += " ";
      series += v.empty() ? "_x" + std::to_string(repeat) : v + "x" + std::to_string(repeat - 1);
    }
    out += "      - series: '" + key + "'\n        values: '" + series + "'\n";
  }
  return out;
}

LabelShapes ScrapeShapes(const std::string& text, const std::set<std::string>& ignore) {
  LabelShapes out;
  std::istringstream in(text);
  Sample s;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#' && ParseSample(line, &s)) AddShape(s, ignore, &out);
  return out;
}

LabelShapes PromtoolShapes(const std::string& yaml, const std::set<std::string>& ignore) {
  LabelShapes out;
  static const std::regex series(R"(series:\s*'([^']*)')");
  Sample s;
  for (auto it = std::sregex_iterator(yaml.begin(), yaml.end(), series);
       it != std::sregex_iterator(); ++it)
    if (ParseSample((*it)[1].str() + " 0", &s)) AddShape(s, ignore, &out);
  return out;
}

PromtoolResult PromtoolTestRules(const std::string& file) {
  RunResult r = RunCommand({"promtool", "test", "rules", file});
  return {r.code, r.out};
}

}  // namespace ef::test
