// Contract v1, rule 1: MurmurHash3_x64_128 (reference algorithm, Debian's
// libmurmurhash) of the item ID's bytes; the two 64-bit output words are h1, h2.
// Test vector: "hello", seed 0 -> h1 = 0xcbd8a7b341bd9b02, h2 = 0x5b1e906a48ae1d19.
#pragma once

#include <cstdint>
#include <string_view>

namespace ef {

struct Hash128 {
  uint64_t h1;
  uint64_t h2;
};

// Pure and thread-safe. item_id.size() must be below 2^32 (the library takes an
// unsigned int length; event decoding bounds IDs far below that).
Hash128 HashItem(std::string_view item_id, uint32_t seed);

}  // namespace ef
