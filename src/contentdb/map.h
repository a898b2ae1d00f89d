// The item -> cluster map of the content index (docs/CONTENT.md rule 4): its
// keys and values, pure, no I/O. Apart from index.h so that readers (the client
// library, whose installed archive has no content/ code) can decode the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ef::contentdb {

// Item IDs the index takes: 1 to this many bytes.
inline constexpr size_t kMaxContentItemBytes = 1024;

// `<prefix>cm{<item>}`.
std::string MapKey(std::string_view prefix, std::string_view item_id);
// A map entry's value: 8 bytes sequence, 8 bytes fingerprint (both big-endian),
// then the cluster ID's bytes.
std::string EncodeMapValue(uint64_t seq, uint64_t simhash, std::string_view cluster);
struct MapValue {
  uint64_t seq = 0;
  uint64_t simhash = 0;
  std::string cluster;
};
std::optional<MapValue> DecodeMapValue(std::string_view value);  // nullopt if < 17 bytes
// The 8 big-endian bytes of v, appended; and back (s has at least 8 bytes).
void PutBigEndian(uint64_t v, std::string* out);
uint64_t GetBigEndian(std::string_view s);

}  // namespace ef::contentdb
