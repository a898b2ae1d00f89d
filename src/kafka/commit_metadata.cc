#include "kafka/commit_metadata.h"

#include <charconv>

namespace ef {
namespace {

bool ReadField(std::string_view& s, std::string_view name, int64_t* out) {
  if (s.substr(0, name.size()) != name) return false;
  s.remove_prefix(name.size());
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ec != std::errc()) return false;
  s.remove_prefix(static_cast<size_t>(p - s.data()));
  return true;
}

}  // namespace

std::string EncodeCommitMetadata(const CommitMetadata& m) {
  return "ef1 commit_ms=" + std::to_string(m.commit_ms) + " event_ms=" + std::to_string(m.event_ms);
}

std::optional<CommitMetadata> DecodeCommitMetadata(std::string_view s) {
  CommitMetadata m;
  if (!ReadField(s, "ef1 commit_ms=", &m.commit_ms)) return std::nullopt;
  if (!ReadField(s, " event_ms=", &m.event_ms)) return std::nullopt;
  if (!s.empty()) return std::nullopt;
  return m;
}

}  // namespace ef
