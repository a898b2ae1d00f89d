// Zero-filled memory for large tables that are probed at random (the content
// map's cache, contentdb/cluster_cache.h).
//
// Two costs of a table of many megabytes that a plain std::vector pays and this
// does not:
//   - filling it: a vector writes every element; this memory comes zeroed from
//     the kernel (mmap, from kHugePageBytes), so a table whose empty slot is all
//     zero bytes needs no pass over it, and a page is first touched by its first
//     use (a smaller buffer is zeroed with memset);
//   - its pages: a buffer of kHugePageBytes or more is aligned to that and
//     advised MADV_HUGEPAGE, so that with transparent_hugepage "madvise" (Debian's
//     default) it is faulted in 2 MiB at a time (one fault instead of 512: a 4 KiB
//     fault cost 11 us on the development VM, docs/PERFORMANCE.md) and a random
//     probe's address translation is one TLB entry per 2 MiB. Where the kernel
//     gives no huge pages the memory is still correct, zeroed 4 KiB pages.
#pragma once

#include <cstddef>

namespace ef {

class ZeroedPages {
 public:
  static constexpr size_t kHugePageBytes = 2 * 1024 * 1024;
  // data() is aligned to at least this (a cache line; a huge page from
  // kHugePageBytes).
  static constexpr size_t kSmallAlignment = 64;

  ZeroedPages() = default;
  // `bytes` zero bytes (none for 0). Throws std::bad_alloc when the memory
  // cannot be had.
  explicit ZeroedPages(size_t bytes);
  ~ZeroedPages() { Release(); }
  ZeroedPages(ZeroedPages&& o);
  ZeroedPages& operator=(ZeroedPages&& o);
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }  // the bytes asked for
  // Sets every byte to zero again (the memory stays allocated and resident).
  void Zero();

 private:
  void Release();
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes mapped with mmap (0: aligned_alloc's, or none)
};

}  // namespace ef
