#include "contentdb/groups.h"

#include <algorithm>
#include <cstdio>

#include "contentdb/map.h"

namespace ef::contentdb {

GroupLayout::GroupLayout(std::string prefix, const content::BlockScheme& scheme, int group_bits,
                         int64_t retention_ms)
    : prefix_(std::move(prefix)),
      scheme_(&scheme),
      group_bits_(group_bits),
      retention_ms_(retention_ms),
      generation_ms_(std::max<int64_t>(1, retention_ms / 2)) {}

int64_t GroupLayout::OldestGeneration(int64_t now_ms) const {
  // A key of generation g lives while now < (g + 1) * G + retention.
  const int64_t from = now_ms - retention_ms_;
  return from < 0 ? 0 : from / generation_ms_;
}

int GroupLayout::group_bits(int table) const {
  return std::min(group_bits_, scheme_->key_bits(table));
}

GroupPlace GroupLayout::Place(int table, uint64_t fp, int64_t gen) const {
  const int bits = scheme_->key_bits(table);
  const int g = group_bits(table);
  const uint64_t key = scheme_->Key(table, fp);
  const int rest = bits - g;
  const uint64_t group = rest >= 64 ? 0 : key >> rest;
  const uint64_t score = rest >= 64 ? key : key & ((uint64_t{1} << rest) - 1);
  const int digits = std::max(1, (g + 3) / 4);
  char buf[80];
  std::snprintf(buf, sizeof(buf), "cg{%d:%0*llx:%lld}", table, digits,
                static_cast<unsigned long long>(group), static_cast<long long>(gen));
  return {prefix_ + buf, std::to_string(score)};
}

std::string GroupLayout::Member(uint64_t fp, std::string_view item) {
  std::string m;
  m.reserve(8 + item.size());
  PutBigEndian(fp, &m);
  m.append(item);
  return m;
}

bool GroupLayout::ParseMember(std::string_view member, uint64_t* fp, std::string_view* item) {
  if (member.size() < 9) return false;
  *fp = GetBigEndian(member);
  *item = member.substr(8);
  return true;
}

}  // namespace ef::contentdb
