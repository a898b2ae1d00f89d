#include "metrics/build_info.h"

#include <prometheus/gauge.h>

#ifndef EF_REVISION
#define EF_REVISION "unknown"
#endif

namespace ef {

const char* BuildVersion() { return EF_VERSION; }

const char* BuildRevision() { return EF_REVISION; }

std::string BuildDescription() {
  return std::string("exposure-filter ") + BuildVersion() + " (revision " + BuildRevision() + ")";
}

void RegisterBuildInfo(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("exposure_filter_build_info")
      .Help("Always 1; the labels say which build this is")
      .Register(registry)
      .Add({{"version", BuildVersion()}, {"revision", BuildRevision()}})
      .Set(1);
}

}  // namespace ef
