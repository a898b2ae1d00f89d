// FORMAT.md's Python reference reader (tests/interop/format_ref.py check) run
// against a test's redis-server: what another language's reader answers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ef::test {

struct RefCheck {
  int code = -1;           // the script's exit code
  std::string out;         // its output: "seen <item>" / "unseen <item>" lines
  std::vector<bool> seen;  // per item, parsed from out (empty unless code is 0)
  size_t unseen() const;   // items answered unseen
};

// `format_ref.py check --port P --prefix X --user U --now T items...`.
RefCheck FormatRefCheck(int port, const std::string& prefix, const std::string& user,
                        const std::vector<std::string>& items, int64_t now_s);

}  // namespace ef::test
