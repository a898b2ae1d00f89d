#include "contentdb/map.h"

namespace ef::contentdb {

std::string MapKey(std::string_view prefix, std::string_view item_id) {
  std::string key(prefix);
  key += "cm{";
  key += item_id;
  key += '}';
  return key;
}

void PutBigEndian(uint64_t v, std::string* out) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBigEndian(std::string_view s) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(s[static_cast<size_t>(i)]);
  return v;
}

std::string EncodeMapValue(uint64_t seq, uint64_t simhash, std::string_view cluster) {
  std::string v;
  v.reserve(16 + cluster.size());
  PutBigEndian(seq, &v);
  PutBigEndian(simhash, &v);
  v += cluster;
  return v;
}

std::optional<MapValue> DecodeMapValue(std::string_view value) {
  if (value.size() < 17) return std::nullopt;
  MapValue v;
  v.seq = GetBigEndian(value.substr(0, 8));
  v.simhash = GetBigEndian(value.substr(8, 8));
  v.cluster = std::string(value.substr(16));
  return v;
}

}  // namespace ef::contentdb
