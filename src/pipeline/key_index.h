// KeyIndex: an open-addressing hash index from 64-bit key hashes to dense entry
// numbers 0, 1, 2, ... (in insertion order), for the Coalescer's per-batch key
// lookup. The caller keeps the keys (entry i is its i-th key) and answers the
// equality question; the index keeps only hashes. Linear probing over a
// power-of-two table, load factor at most 1/2. Clear() is O(1) (a generation
// number marks live slots) and keeps all memory, so a steady stream of batches
// allocates nothing. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace ef {

// A fast 64-bit hash of a byte string for in-process tables (wyhash-style
// multiply-fold). Not a contract hash: never stored, never sent.
inline uint64_t HashKeyBytes(std::string_view s) {
  constexpr uint64_t kS0 = 0xa0761d6478bd642full;
  constexpr uint64_t kS1 = 0xe7037ed1a0b428dbull;
  constexpr uint64_t kS2 = 0x8ebc6af09c88c6e3ull;
  auto mum = [](uint64_t a, uint64_t b) {
    __extension__ using U128 = unsigned __int128;
    const U128 r = static_cast<U128>(a) * b;
    return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
  };
  auto load64 = [](const char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  auto load32 = [](const char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<uint64_t>(v);
  };
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = kS0 ^ static_cast<uint64_t>(n);
  while (n > 16) {
    h = mum(load64(p) ^ kS1, load64(p + 8) ^ h);
    p += 16;
    n -= 16;
  }
  uint64_t a = 0;
  uint64_t b = 0;
  if (n > 8) {
    a = load64(p);
    b = load64(p + n - 8);
  } else if (n >= 4) {
    a = load32(p);
    b = load32(p + n - 4);
  } else if (n > 0) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    a = (uint64_t{u[0]} << 16) | (uint64_t{u[n >> 1]} << 8) | u[n - 1];
  }
  return mum(mum(a ^ kS1, b ^ h) ^ kS2, static_cast<uint64_t>(s.size()) ^ kS1);
}

class KeyIndex {
 public:
  KeyIndex() : slots_(kMinSlots), mask_(kMinSlots - 1) {}

  // Number of entries since the last Clear().
  size_t size() const { return hashes_.size(); }
  // Table size (a power of two); grows, never shrinks.
  size_t capacity() const { return slots_.size(); }

  // Returns the entry whose hash is `hash` and for which is_key(entry) is true;
  // if there is none, adds entry size() with this hash, sets *added and returns
  // it. is_key is only asked about entries with an equal hash.
  template <typename IsKey>
  uint32_t FindOrAdd(uint64_t hash, IsKey&& is_key, bool* added) {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.gen != gen_) {
        const auto entry = static_cast<uint32_t>(hashes_.size());
        hashes_.push_back(hash);
        if (hashes_.size() * 2 > slots_.size()) {
          Grow();  // re-places every entry, the new one included
        } else {
          s = Slot{hash, entry, gen_};
        }
        *added = true;
        return entry;
      }
      if (s.hash == hash && is_key(s.entry)) {
        *added = false;
        return s.entry;
      }
    }
  }

  // Forgets every entry in O(1); keeps the table and its size.
  void Clear() {
    hashes_.clear();
    if (++gen_ == 0) {  // wrapped after 2^32 clears: old marks could look live
      std::memset(slots_.data(), 0, slots_.size() * sizeof(Slot));
      gen_ = 1;
    }
  }

 private:
  static constexpr size_t kMinSlots = 1024;

  struct Slot {
    uint64_t hash;
    uint32_t entry;
    uint32_t gen;  // live iff == gen_; 0 is never live
  };

  void Grow() {
    size_t n = slots_.size();
    while (hashes_.size() * 2 > n) n *= 2;
    slots_.assign(n, Slot{0, 0, 0});
    mask_ = n - 1;
    gen_ = 1;
    for (size_t e = 0; e < hashes_.size(); ++e) {
      size_t i = hashes_[e] & mask_;
      while (slots_[i].gen == gen_) i = (i + 1) & mask_;
      slots_[i] = Slot{hashes_[e], static_cast<uint32_t>(e), gen_};
    }
  }

  std::vector<Slot> slots_;
  size_t mask_;
  uint32_t gen_ = 1;
  std::vector<uint64_t> hashes_;  // entry → hash, to re-place entries on growth
};

}  // namespace ef
