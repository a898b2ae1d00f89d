#include "support/guard_page.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ef::test {

GuardedBytes::GuardedBytes(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t data = (bytes + page - 1) / page * page;
  map_bytes_ = data + page;
  void* m = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("GuardedBytes: mmap");
    std::abort();
  }
  map_ = static_cast<char*>(m);
  end_ = map_ + data;
  if (mprotect(end_, page, PROT_NONE) != 0) {
    std::perror("GuardedBytes: mprotect");
    std::abort();
  }
}

GuardedBytes::~GuardedBytes() { munmap(map_, map_bytes_); }

}  // namespace ef::test
