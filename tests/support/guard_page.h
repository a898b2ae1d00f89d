// Memory that ends where an unmapped page begins, for tests of code that must
// read no byte past the end of its input (vector loads: a read past the end
// faults here, where inside a std::string's capacity even ASan would not see it).
#pragma once

#include <cstddef>

namespace ef::test {

class GuardedBytes {
 public:
  // Room for `bytes` bytes followed by an inaccessible page. Aborts the test
  // binary if the mapping fails (no test could run meaningfully).
  explicit GuardedBytes(size_t bytes);
  ~GuardedBytes();
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;

  // The first of the last n bytes before the guard page (n <= the size given).
  char* EndingAtGuard(size_t n) const { return end_ - n; }

 private:
  char* map_ = nullptr;
  size_t map_bytes_ = 0;
  char* end_ = nullptr;
};

}  // namespace ef::test
