// Realistic JSON exposure payloads shared by the microbenchmarks (decode_bench.cc,
// hash_bench.cc). Deterministic: each generator has its own fixed seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ef {
namespace bench {

inline constexpr int64_t kNowMs = 1763856000500;
inline constexpr int64_t kTsMs = 1763800000123;
// Varied IDs, so branches and lengths are not one pattern.
inline constexpr size_t kPayloads = 4096;

inline std::string RandomId(std::mt19937_64& rng, char prefix) {
  return prefix + std::to_string(1000000 + rng() % 900000000);
}

// ≈ 70 bytes: {"user_id":"u123456789","item_id":"i987654321","ts":1763800000123}
inline std::vector<std::string> SinglePayloads() {
  std::mt19937_64 rng(1);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"user_id":")" + RandomId(rng, 'u') + R"(","item_id":")" + RandomId(rng, 'i') +
                  R"(","ts":)" + std::to_string(kTsMs + i) + "}");
  }
  return out;
}

inline std::vector<std::string> SingleIntegerPayloads() {
  std::mt19937_64 rng(2);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"user_id":)" + std::to_string(rng() % 100000000) + R"(,"item_id":)" +
                  std::to_string(rng() % 10000000000) + R"(,"ts":)" + std::to_string(kTsMs + i) +
                  "}");
  }
  return out;
}

// What producers often send: the exposure plus context the decoder skips.
inline std::vector<std::string> SingleWithContextPayloads() {
  std::mt19937_64 rng(3);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads; ++i) {
    out.push_back(R"({"event":"exposure","user_id":")" + RandomId(rng, 'u') + R"(","item_id":")" +
                  RandomId(rng, 'i') + R"(","ts":)" + std::to_string(kTsMs + i) +
                  R"(,"page":"home","pos":)" + std::to_string(rng() % 50) +
                  R"(,"app":{"os":"android","ver":"8.12.0"},"ab":["feed_v2","rank_b"]})");
  }
  return out;
}

// kPayloads / 4 list-form payloads of `items` item IDs each.
inline std::vector<std::string> ListPayloads(int items) {
  std::mt19937_64 rng(4);
  std::vector<std::string> out;
  for (size_t i = 0; i < kPayloads / 4; ++i) {
    std::string s = R"({"user_id":")" + RandomId(rng, 'u') + R"(","items":[)";
    for (int k = 0; k < items; ++k) {
      if (k > 0) s += ',';
      s += '"' + RandomId(rng, 'i') + '"';
    }
    s += R"(],"ts":)" + std::to_string(kTsMs + i) + "}";
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace bench
}  // namespace ef
