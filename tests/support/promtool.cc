#include "support/promtool.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "support/process.h"
#include "support/scrape.h"

namespace ef::test {
namespace {

std::string SeriesKey(const PromSample& s) {
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

void AddShape(const PromSample& s, const std::set<std::string>& ignore, LabelShapes* out) {
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
    for (PromSample s : ParseProm(scrapes[i])) {
      s.labels["job"] = job;
      s.labels["instance"] = instance;
      auto& v = values[SeriesKey(s)];
      v.resize(scrapes.size());
      v[i] = s.value_text == "+Inf" ? "Inf" : s.value_text;
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
  for (const PromSample& s : ParseProm(text)) AddShape(s, ignore, &out);
  return out;
}

LabelShapes PromtoolShapes(const std::string& yaml, const std::set<std::string>& ignore) {
  LabelShapes out;
  static const std::regex series(R"(series:\s*'([^']*)')");
  for (auto it = std::sregex_iterator(yaml.begin(), yaml.end(), series);
       it != std::sregex_iterator(); ++it)
    for (const PromSample& s : ParseProm((*it)[1].str() + " 0")) AddShape(s, ignore, &out);
  return out;
}

PromtoolResult PromtoolTestRules(const std::string& file) {
  RunResult r = RunCommand({"promtool", "test", "rules", file});
  return {r.code, r.out};
}

size_t CheckAlertTestShapes(const std::string& scrape,
                            const std::function<bool(const std::string&)>& want) {
  std::ifstream in(std::string(EF_SOURCE_DIR) + "/tests/promtool/alerts_test.yml");
  const std::string tests((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const LabelShapes real = ScrapeShapes(scrape, {});
  size_t checked = 0;
  for (const auto& [name, shapes] : PromtoolShapes(tests, {"job", "instance"})) {
    if (!want(name)) continue;
    ++checked;
    INFO("alerts_test.yml uses " << name);
    REQUIRE(real.count(name) == 1);
    for (const auto& labels : shapes) {
      std::string list;
      for (const auto& l : labels) list += l + " ";
      INFO("with the labels " << list);
      CHECK(real.at(name).count(labels) == 1);
    }
  }
  return checked;
}

}  // namespace ef::test
