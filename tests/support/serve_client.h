// What tests ask `exposure-filter serve` over HTTP (docs/HTTP.md).
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace ef::test {

// POST /v1/filter; the reply's "unseen", or nullopt on an HTTP failure.
inline std::optional<std::vector<std::string>> ServeUnseen(httplib::Client& c,
                                                           const std::string& user,
                                                           const std::vector<std::string>& items) {
  auto r = c.Post("/v1/filter", nlohmann::json{{"user_id", user}, {"items", items}}.dump(),
                  "application/json");
  if (!r || r->status != 200) return std::nullopt;
  return nlohmann::json::parse(r->body).at("unseen").get<std::vector<std::string>>();
}

// A sample's value in Prometheus text (a /metrics body; `series` exact, labels as
// serialised), or -1 when absent.
inline double SampleValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace ef::test
