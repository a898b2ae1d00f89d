// exposure_filter_build_info (metrics/build_info.h): one series, value 1, labelled
// with the project version and the revision (issue 27).
#include "metrics/build_info.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

namespace ef {

TEST_CASE("build_info: one series, 1, labelled with the version and the revision",
          "[metrics][version]") {
  prometheus::Registry registry;
  RegisterBuildInfo(registry);
  size_t series = 0;
  for (const auto& family : registry.Collect()) {
    if (family.name != "exposure_filter_build_info") continue;
    for (const auto& metric : family.metric) {
      ++series;
      std::map<std::string, std::string> labels;
      for (const auto& l : metric.label) labels[l.name] = l.value;
      CHECK(labels.at("version") == EF_VERSION);
      CHECK(labels.at("revision") == BuildRevision());
      CHECK_FALSE(labels.at("revision").empty());
      CHECK(metric.gauge.value == 1);
    }
  }
  CHECK(series == 1);
  CHECK(BuildDescription() ==
        std::string("exposure-filter ") + EF_VERSION + " (revision " + BuildRevision() + ")");
}

}  // namespace ef
