#include "bloom/hash.h"

#include <murmurhash.h>

namespace ef {

// libmurmurhash is the reference MurmurHash3 code, whose out[0] and out[1] are
// already the native 64-bit words h1 and h2 of the contract on little-endian
// hosts: no byte swapping. The reference reads input blocks in native byte order,
// so a big-endian build would hash differently; the unit tests cross-check
// against an implementation that reads bytes explicitly little-endian and would
// catch that.
Hash128 HashItem(std::string_view item_id, uint32_t seed) {
  uint64_t out[2];
  lmmh_x64_128(item_id.data(), static_cast<unsigned int>(item_id.size()), seed, out);
  return Hash128{out[0], out[1]};
}

}  // namespace ef
