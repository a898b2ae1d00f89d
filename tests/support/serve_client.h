// What tests ask `exposure-filter serve` over HTTP (docs/HTTP.md).
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
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

}  // namespace ef::test
