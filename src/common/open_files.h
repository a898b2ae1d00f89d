// The process's open file limit (RLIMIT_NOFILE).
#pragma once

#include <cstdint>

namespace ef {

// Raises the soft limit to the hard one (often 1024 against 1048576), as nginx
// and Go's runtime do for processes that hold thousands of sockets. Returns the
// soft limit in force afterwards (0 if it cannot be read).
uint64_t RaiseOpenFileLimit();

}  // namespace ef
