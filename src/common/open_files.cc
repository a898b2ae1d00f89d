#include "common/open_files.h"

#include <sys/resource.h>

namespace ef {

uint64_t RaiseOpenFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return static_cast<uint64_t>(r.rlim_cur);
}

}  // namespace ef
