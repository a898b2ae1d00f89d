// exposure_filter_build_info{version, revision} 1: which build answers, as
// Prometheus convention has it (join on it to tell versions apart in a rollout).
// version is the project version (CMakeLists.txt, the one `--version`, the Docker
// image tag and the module's EF.VERSION derive from); revision the git commit
// the build was configured at ("unknown" outside a checkout).
#pragma once

#include <prometheus/registry.h>

#include <string>

namespace ef {

// "0.1.0"
const char* BuildVersion();
// "a1b2c3d4e5f6" or "unknown"
const char* BuildRevision();
// "exposure-filter 0.1.0 (revision a1b2c3d4e5f6)"
std::string BuildDescription();

void RegisterBuildInfo(prometheus::Registry& registry);

}  // namespace ef
