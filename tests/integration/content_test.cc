// docs/CONTENT.md rule 1 against an independent implementation: the document's
// own Python reference (tests/interop/content_ref.py runs its code block) gives
// the C++ fingerprint for random tokens (ASCII, Chinese, long ones: every XXH64
// path) and weights (0 to 2^32 - 1), with seed 0 and another seed.
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "content/simhash.h"
#include "support/process.h"

namespace ef::test {
namespace {

TEST_CASE("content: the CONTENT.md Python reference computes the C++ fingerprints",
          "[integration][content][interop]") {
  std::mt19937_64 rng(2026);
  const std::vector<std::string> pieces = {"a", "news", "新闻", "商品", "é", " ", "x0"};
  for (const uint64_t seed : {uint64_t{0}, uint64_t{123456789}}) {
    std::vector<std::vector<content::WeightedToken>> lists(200);
    std::string input;
    for (auto& list : lists) {
      list.resize(rng() % 30);
      for (auto& t : list) {
        const size_t parts = 1 + rng() % 20;  // up to ~120 bytes: the 32-byte stripes too
        for (size_t p = 0; p < parts; ++p) t.token += pieces[rng() % pieces.size()];
        t.weight = static_cast<uint32_t>(rng() % 3 == 0 ? rng() : rng() % 5);
      }
      nlohmann::json j = nlohmann::json::array();
      for (const auto& t : list) j.push_back({t.token, t.weight});
      input += j.dump() + "\n";
    }
    const std::string ref = std::string(EF_SOURCE_DIR) + "/tests/interop/content_ref.py";
    auto r =
        RunCommand({"python3", ref, "fingerprint", "--seed", std::to_string(seed)}, input, true);
    INFO(r.out.substr(0, 500));
    REQUIRE(r.code == 0);
    std::istringstream out(r.out);
    size_t n = 0, nonzero = 0;
    for (std::string hex; out >> hex; ++n) {
      REQUIRE(n < lists.size());
      const uint64_t cpp = content::Simhash(lists[n], seed);
      char want[17];
      std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(cpp));
      CHECK(hex == want);
      nonzero += cpp != 0;
    }
    CHECK(n == lists.size());
    CHECK(nonzero > 100);  // the comparison is not of zeros
  }
}

}  // namespace
}  // namespace ef::test
