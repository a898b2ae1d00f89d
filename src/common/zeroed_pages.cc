#include "common/zeroed_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace ef {

ZeroedPages::ZeroedPages(size_t bytes) {
  if (bytes == 0) return;
  if (bytes < kHugePageBytes) {
    // Aligned to a cache line (calloc's 16 bytes would not do for a table of
    // 32-byte aligned slots), zeroed here: small enough that the pass is cheap.
    const size_t whole = (bytes + kSmallAlignment - 1) / kSmallAlignment * kSmallAlignment;
    data_ = std::aligned_alloc(kSmallAlignment, whole);
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, whole);
    size_ = bytes;
    return;
  }
  // Aligned to a huge page, in whole small pages (the kernel backs the last,
  // partial 2 MiB with small pages, so nothing past `bytes` but the rest of a
  // small page is ever resident): map a huge page more than needed and give back
  // what lies before the first boundary and after the last page.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t whole = (bytes + page - 1) / page * page;
  const size_t span = whole + kHugePageBytes;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (at + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (start > at) munmap(p, start - at);
  const size_t after = at + span - (start + whole);
  if (after > 0) munmap(reinterpret_cast<void*>(start + whole), after);
  data_ = reinterpret_cast<void*>(start);
  size_ = bytes;
  mapped_ = whole;
  // Advice only: a kernel without transparent huge pages refuses it, and the
  // pages are then 4 KiB ones.
  (void)madvise(data_, mapped_, MADV_HUGEPAGE);
}

ZeroedPages::ZeroedPages(ZeroedPages&& o) { *this = std::move(o); }

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& o) {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

void ZeroedPages::Zero() {
  if (size_ > 0) std::memset(data_, 0, size_);
}

void ZeroedPages::Release() {
  if (data_ == nullptr) return;
  if (mapped_ > 0) {
    munmap(data_, mapped_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = 0;
  mapped_ = 0;
}

}  // namespace ef
