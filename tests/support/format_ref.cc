#include "support/format_ref.h"

#include <sstream>

#include "support/process.h"

namespace ef::test {

size_t RefCheck::unseen() const {
  size_t n = 0;
  for (bool s : seen) n += !s;
  return n;
}

RefCheck FormatRefCheck(int port, const std::string& prefix, const std::string& user,
                        const std::vector<std::string>& items, int64_t now_s) {
  std::vector<std::string> argv = {"python3",
                                   std::string(EF_SOURCE_DIR) + "/tests/interop/format_ref.py",
                                   "check",
                                   "--port",
                                   std::to_string(port),
                                   "--prefix",
                                   prefix,
                                   "--user",
                                   user,
                                   "--now",
                                   std::to_string(now_s)};
  argv.insert(argv.end(), items.begin(), items.end());
  const RunResult run = RunCommand(argv, "", true);
  RefCheck r;
  r.code = run.code;
  r.out = run.out;
  if (r.code != 0) return r;
  std::istringstream in(r.out);
  std::string word, item;
  while (in >> word >> item) r.seen.push_back(word == "seen");
  return r;
}

}  // namespace ef::test
