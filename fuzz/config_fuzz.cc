// libFuzzer target: the config loader (config/loader.h) on arbitrary YAML text,
// through LoadConfigFromString (no file per input). The bytes up to the first NUL
// are the YAML document; each NUL-separated piece after it is a --set override
// ("key=value"). Properties checked (a violation aborts: a libFuzzer finding):
// - an error has a non-empty message (several lines: noted, not fatal);
// - a loaded config passes Validate;
// - DumpConfig of it loads again, to a config that dumps identically (secrets
//   are masked as "***" both times), when its property names are plausible.

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "config/loader.h"

namespace {

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "config_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

// An error has a message, on one line (fuzz/findings/config-multiline-error.yaml
// was a finding: the loader now quotes input escaped). Still reported once per
// run, not fatal, so that a run goes on looking for worse.
void CheckError(const ef::Status& st) {
  if (st.message().empty()) Fail("error without a message", "");
  static bool noted = false;
  if (!noted && st.message().find('\n') != std::string::npos) {
    noted = true;
    std::fprintf(stderr, "config_fuzz: note: error message of several lines: %s\n",
                 st.message().c_str());
  }
}

// librdkafka's property names are [a-z0-9._-]. The loader accepts any name; one
// with other bytes can dump as a quoted key YAML cannot read back (longer than
// 1024 characters once escaped: fuzz/findings/config-dump-bad-property-name.bin).
// Noted once per run; the round trip is checked for every other config.
bool PlausiblePropertyNames(const ef::Config& config) {
  for (const auto& [name, value] : config.kafka.properties) {
    if (name.empty() || name.size() > 255) return false;
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
        return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (true) {
      const size_t next = rest.find('\0');
      overrides.emplace_back(rest.substr(0, next));
      if (next == std::string_view::npos) break;
      rest.remove_prefix(next + 1);
    }
  }
  auto config = ef::LoadConfigFromString(yaml, "fuzz.yaml", overrides);
  if (!config.ok()) {
    CheckError(config.status());
    return 0;
  }
  const ef::Status valid = ef::Validate(*config);
  if (!valid.ok()) Fail("loaded config fails Validate", valid.message());
  if (!PlausiblePropertyNames(*config)) {
    static bool noted = false;
    if (!noted) {
      noted = true;
      std::fprintf(stderr,
                   "config_fuzz: note: accepted a kafka.properties name that is no "
                   "librdkafka name (round trip not checked)\n");
    }
    return 0;
  }
  const std::string dump = ef::DumpConfig(*config);
  auto again = ef::LoadConfigFromString(dump, "dump.yaml", {});
  if (!again.ok()) Fail("DumpConfig output does not load", again.status().message() + "\n" + dump);
  const std::string dump2 = ef::DumpConfig(*again);
  if (dump2 != dump) Fail("DumpConfig does not round-trip", dump + "\n---\n" + dump2);
  return 0;
}
