// Contract v1 (docs/FORMAT.md): hash, positions, bit order, sizing, keys, and the
// size report. The hash vectors are checked against both the library-backed
// HashItem and an independent MurmurHash3_x64_128 written here from the
// reference algorithm, so neither can drift alone.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/hash.h"
#include "bloom/keys.h"
#include "bloom/positions.h"
#include "bloom/sizing.h"
#include "capacity/size_report.h"

namespace ef {
namespace {

// ---------------------------------------------------------------------------
// Independent MurmurHash3_x64_128 (Austin Appleby's reference algorithm).
// Blocks and tail are read byte by byte, little-endian, so the result does not
// depend on the host byte order.

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t Fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

uint64_t LoadLe(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

Hash128 RefMurmur3(std::string_view data, uint32_t seed) {
  constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;
  constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const size_t len = data.size();
  uint64_t h1 = seed;
  uint64_t h2 = seed;
  const size_t nblocks = len / 16;
  for (size_t b = 0; b < nblocks; ++b) {
    uint64_t k1 = LoadLe(bytes + 16 * b, 8);
    uint64_t k2 = LoadLe(bytes + 16 * b + 8, 8);
    k1 *= kC1;
    k1 = Rotl(k1, 31);
    k1 *= kC2;
    h1 ^= k1;
    h1 = Rotl(h1, 27);
    h1 += h2;
    h1 = h1 * 5 + 0x52dce729;
    k2 *= kC2;
    k2 = Rotl(k2, 33);
    k2 *= kC1;
    h2 ^= k2;
    h2 = Rotl(h2, 31);
    h2 += h1;
    h2 = h2 * 5 + 0x38495ab5;
  }
  const unsigned char* tail = bytes + 16 * nblocks;
  const size_t rest = len % 16;
  if (rest > 8) {
    uint64_t k2 = LoadLe(tail + 8, rest - 8);
    k2 *= kC2;
    k2 = Rotl(k2, 33);
    k2 *= kC1;
    h2 ^= k2;
  }
  if (rest > 0) {
    uint64_t k1 = LoadLe(tail, rest < 8 ? rest : 8);
    k1 *= kC1;
    k1 = Rotl(k1, 31);
    k1 *= kC2;
    h1 ^= k1;
  }
  h1 ^= len;
  h2 ^= len;
  h1 += h2;
  h2 += h1;
  h1 = Fmix(h1);
  h2 = Fmix(h2);
  h1 += h2;
  h2 += h1;
  return Hash128{h1, h2};
}

std::vector<uint32_t> Positions(std::string_view item, uint32_t seed, uint32_t m, uint32_t k) {
  std::vector<uint32_t> out(k);
  ComputePositions(HashItem(item, seed), m, k, out.data());
  return out;
}

// ---------------------------------------------------------------------------
// Hash

struct Vector {
  std::string_view item;
  uint32_t seed;
  uint64_t h1;
  uint64_t h2;
  std::vector<uint32_t> pos_1000_7;   // m = 1000, k = 7
  std::vector<uint32_t> pos_default;  // m = 3345, k = 12 (200/bucket, 1%, 30d, 1d)
};

// The table of docs/FORMAT.md. Generated with HashItem + ComputePositions and
// with the Python reference there; checked below against RefMurmur3 too.
const std::vector<Vector>& ContractVectors() {
  static const std::vector<Vector> kVectors = {
      {"hello",
       0,
       0xcbd8a7b341bd9b02ULL,
       0x5b1e906a48ae1d19ULL,
       {306, 931, 172, 413, 38, 279, 520},
       {2631, 3301, 2682, 2063, 2733, 2114, 1495, 2165, 1546, 927, 1597, 978}},
      {"", 0, 0, 0, {0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
      {"i9",
       0,
       0x3ff388c051b5313dULL,
       0x1f449ab95933129bULL,
       {861, 72, 283, 494, 705, 916, 127},
       {3031, 2117, 1203, 289, 2720, 1806, 892, 1267, 353, 2784, 1870, 956}},
      {"item-123456",
       0,
       0x93da28a38ec49db1ULL,
       0x219a2567c2ab937dULL,
       {985, 414, 843, 272, 85, 514, 943},
       {2530, 1649, 768, 3232, 295, 2759, 1878, 997, 116, 2580, 1699, 2107}},
      {"123456789",
       0,
       0x3c84645edb66cca4ULL,
       0x99f8fac73a1ea105ULL,
       {540, 169, 182, 195, 824, 837, 466},
       {505, 1909, 1257, 605, 2009, 1357, 2761, 2109, 1457, 2861, 2209, 268}},
      {"user-feed-item-0000000042",
       0,
       0xb201b6c5ede70f17ULL,
       0xb6fb1b4fbf651273ULL,
       {679, 522, 365, 824, 667, 510, 969},
       {1649, 3242, 1490, 1794, 42, 1635, 1939, 187, 1780, 28, 332, 1925}},
      {"\xe5\x95\x86\xe5\x93\x81-1",
       0,
       0x5aa89106115d5e67ULL,
       0xff8cb4dc5ccd7b7aULL,
       {431, 497, 563, 629, 695, 761, 827},
       {101, 2757, 2068, 1379, 690, 1, 2657, 1968, 1279, 590, 3246, 2557}},
      {"hello",
       42,
       0xc4b8b3c960af6f08ULL,
       0x2334b875b0efbc7aULL,
       {520, 178, 220, 878, 536, 194, 852},
       {3220, 2668, 60, 2853, 2301, 1749, 1197, 645, 93, 830, 278, 3071}},
      {"i9",
       0xdeadbeef,
       0x5ef9b0ff64429709ULL,
       0x74010297d19146f6ULL,
       {25, 535, 429, 939, 833, 343, 237},
       {80, 2805, 129, 2854, 178, 2903, 227, 2952, 2332, 3001, 2381, 3050}},
  };
  return kVectors;
}

TEST_CASE("HashItem reproduces the contract test vector for \"hello\"", "[bloom]") {
  const Hash128 h = HashItem("hello", 0);
  CHECK(h.h1 == 0xcbd8a7b341bd9b02ULL);
  CHECK(h.h2 == 0x5b1e906a48ae1d19ULL);
  const Hash128 r = RefMurmur3("hello", 0);
  CHECK(r.h1 == 0xcbd8a7b341bd9b02ULL);
  CHECK(r.h2 == 0x5b1e906a48ae1d19ULL);
}

TEST_CASE("HashItem and positions match the FORMAT.md vectors", "[bloom]") {
  for (const Vector& v : ContractVectors()) {
    INFO("item \"" << v.item << "\" seed " << v.seed);
    const Hash128 h = HashItem(v.item, v.seed);
    CHECK(h.h1 == v.h1);
    CHECK(h.h2 == v.h2);
    const Hash128 r = RefMurmur3(v.item, v.seed);
    CHECK(r.h1 == v.h1);
    CHECK(r.h2 == v.h2);
    CHECK(Positions(v.item, v.seed, 1000, 7) == v.pos_1000_7);
    CHECK(Positions(v.item, v.seed, 3345, 12) == v.pos_default);
  }
}

TEST_CASE("HashItem agrees with the independent implementation on random input", "[bloom]") {
  std::mt19937_64 rng(20251122);
  std::uniform_int_distribution<int> len_dist(0, 100);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  const uint32_t seeds[] = {0, 1, 42, 0x7fffffffu, 0x80000000u, 0xffffffffu};
  int mismatches = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string s(static_cast<size_t>(len_dist(rng)), '\0');
    for (char& c : s) c = static_cast<char>(byte_dist(rng));  // NULs and high bytes too
    const uint32_t seed = i % 7 == 6 ? static_cast<uint32_t>(rng()) : seeds[i % 6];
    const Hash128 a = HashItem(s, seed);
    const Hash128 b = RefMurmur3(s, seed);
    if (a.h1 != b.h1 || a.h2 != b.h2) {
      ++mismatches;
      INFO("length " << s.size() << " seed " << seed);
      CHECK(a.h1 == b.h1);
      CHECK(a.h2 == b.h2);
    }
  }
  CHECK(mismatches == 0);
  // Every tail length 0..15 across one and two blocks, deterministically.
  std::string s;
  for (int n = 0; n <= 40; ++n) {
    const Hash128 a = HashItem(s, 7);
    const Hash128 b = RefMurmur3(s, 7);
    CHECK(a.h1 == b.h1);
    CHECK(a.h2 == b.h2);
    s.push_back(static_cast<char>('a' + n % 26));
  }
}

TEST_CASE("positions for \"hello\", m=1000, k=7, from the formula by hand", "[bloom]") {
  const unsigned __int128 h1 = 0xcbd8a7b341bd9b02ULL;
  const unsigned __int128 h2 = 0x5b1e906a48ae1d19ULL;
  const unsigned __int128 two64 = static_cast<unsigned __int128>(1) << 64;
  std::vector<uint32_t> expected;
  for (unsigned i = 0; i < 7; ++i) {
    // p_i = ((h1 + i*h2) mod 2^64) mod m, in 128-bit arithmetic with no wrap.
    const unsigned __int128 sum = h1 + i * h2;
    expected.push_back(static_cast<uint32_t>((sum % two64) % 1000));
  }
  CHECK(expected == std::vector<uint32_t>{306, 931, 172, 413, 38, 279, 520});
  // Spelled out:
  //   i = 0: h1 = 14688674573012802306;                     mod 1000 = 306
  //   i = 1: h1 + h2 = 0x1_26f7381d8a6bb81b, wraps to 2807774592216315931,
  //          mod 1000 = 931 (without the wrap it would be 547)
  //   i = 2: h1 + 2*h2 = 0x1_8215c887d319d534, wraps to 9373618685129381172,
  //          mod 1000 = 172
  CHECK(uint64_t{0xcbd8a7b341bd9b02ULL} == 14688674573012802306ULL);
  CHECK(14688674573012802306ULL % 1000 == 306);
  const uint64_t wrapped1 = 0xcbd8a7b341bd9b02ULL + 0x5b1e906a48ae1d19ULL;
  CHECK(wrapped1 == 2807774592216315931ULL);
  CHECK(wrapped1 % 1000 == 931);
  CHECK(static_cast<uint64_t>((h1 + h2) % 1000) == 547);  // the unwrapped sum differs
  const uint64_t wrapped2 = wrapped1 + 0x5b1e906a48ae1d19ULL;
  CHECK(wrapped2 == 9373618685129381172ULL);
  CHECK(wrapped2 % 1000 == 172);
  CHECK(Positions("hello", 0, 1000, 7) == expected);
}

TEST_CASE("ComputePositions: m = 1 and k = 1 edge cases", "[bloom]") {
  CHECK(Positions("hello", 0, 1, 5) == std::vector<uint32_t>{0, 0, 0, 0, 0});
  CHECK(Positions("hello", 0, 1000, 1) == std::vector<uint32_t>{306});
  // m = 2^32 - 1, the largest the contract allows.
  const uint32_t m = 0xffffffffu;
  const std::vector<uint32_t> p = Positions("hello", 0, m, 2);
  CHECK(p[0] == 0xcbd8a7b341bd9b02ULL % m);
  CHECK(p[1] == (0xcbd8a7b341bd9b02ULL + 0x5b1e906a48ae1d19ULL) % m);
}

TEST_CASE("TestBit follows Redis bit order: bit 0 is the MSB of byte 0", "[bloom]") {
  // Redis: SETBIT k 0 1 -> "\x80"; SETBIT k 9 1 -> second byte "\x40".
  const char data[] = {'\x80', '\x40'};
  CHECK(TestBit(data, 2, 0));
  CHECK_FALSE(TestBit(data, 2, 1));
  CHECK_FALSE(TestBit(data, 2, 7));
  CHECK_FALSE(TestBit(data, 2, 8));
  CHECK(TestBit(data, 2, 9));
  CHECK_FALSE(TestBit(data, 2, 16));  // beyond the value: 0
  CHECK_FALSE(TestBit(data, 0, 0));   // missing key: empty filter
}

// ---------------------------------------------------------------------------
// Sizing

struct Expected {
  uint32_t buckets;
  uint32_t m;
  uint32_t k;
  long double p_b;
};

// The contract's formulas, computed independently here in long double.
Expected FromFormulas(int64_t n, double p, int64_t window, int64_t bucket) {
  const long double big_b = static_cast<long double>(window / bucket + 1);
  const long double p_b = 1.0L - std::pow(1.0L - static_cast<long double>(p), 1.0L / big_b);
  const long double ln2 = std::log(2.0L);
  const long double m = std::ceil(-static_cast<long double>(n) * std::log(p_b) / (ln2 * ln2));
  long double k = std::round(m / static_cast<long double>(n) * ln2);
  if (k < 1) k = 1;
  return Expected{static_cast<uint32_t>(big_b), static_cast<uint32_t>(m), static_cast<uint32_t>(k),
                  p_b};
}

void CheckAgainstFormulas(int64_t n, double p, int64_t window, int64_t bucket) {
  INFO("n=" << n << " p=" << p << " window=" << window << " bucket=" << bucket);
  const StatusOr<Sizing> s = ComputeSizing(n, p, window, bucket);
  REQUIRE(s.ok());
  const Expected e = FromFormulas(n, p, window, bucket);
  CHECK(s->buckets == e.buckets);
  CHECK(s->m == e.m);
  CHECK(s->k == e.k);
  CHECK(s->bucket_fpr == Approx(static_cast<double>(e.p_b)).epsilon(1e-9));
  CHECK(s->bytes_per_bucket == (uint64_t{s->m} + 7) / 8);
  CHECK(s->bytes_per_window == s->bytes_per_bucket * s->buckets);
  const double expected_b = std::pow(1.0 - std::exp(-static_cast<double>(s->k) * n / s->m), s->k);
  CHECK(s->expected_bucket_fpr == Approx(expected_b).epsilon(1e-9));
  CHECK(s->expected_window_fpr ==
        Approx(1.0 - std::pow(1.0 - expected_b, s->buckets)).epsilon(1e-9));
  // Rounding m up keeps the expected FPR near the target (k is rounded, so it
  // may exceed it by a hair, never by much).
  CHECK(s->expected_window_fpr < p * 1.05);
}

TEST_CASE("ComputeSizing: default layout (200 per day, 1%, 30d window of days)", "[bloom]") {
  const StatusOr<Sizing> s = ComputeSizing(200, 0.01, 30 * 86400, 86400);
  REQUIRE(s.ok());
  CHECK(s->buckets == 31);
  // p_b = 1 - 0.99^(1/31) = 3.2416e-4; m = ceil(200 * 8.0343 / 0.48045) = 3345;
  // k = round(3345 / 200 * 0.6931) = round(11.59) = 12.
  CHECK(s->m == 3345);
  CHECK(s->k == 12);
  CHECK(s->bytes_per_bucket == 419);
  CHECK(s->bytes_per_window == 419 * 31);
  CheckAgainstFormulas(200, 0.01, 30 * 86400, 86400);
}

TEST_CASE("ComputeSizing agrees with the formulas on other layouts", "[bloom]") {
  // window = bucket = 1d: B = 2, the classic n=1000, 1% case split over 2 buckets.
  const StatusOr<Sizing> one = ComputeSizing(1000, 0.01, 86400, 86400);
  REQUIRE(one.ok());
  CHECK(one->buckets == 2);
  CHECK(one->m == 11023);
  CHECK(one->k == 8);
  CheckAgainstFormulas(1000, 0.01, 86400, 86400);
  CheckAgainstFormulas(1000, 0.01, 86400, 3600);  // B = 25
  CheckAgainstFormulas(10000, 1e-6, 30 * 86400, 86400);
  CheckAgainstFormulas(1, 0.5, 3600, 3600);
  CheckAgainstFormulas(5000, 0.001, 7 * 86400, 6 * 3600);
  CheckAgainstFormulas(50, 0.2, 90 * 86400, 86400);
}

TEST_CASE("ComputeSizing: k is at least 1", "[bloom]") {
  // A very loose target gives m/n*ln2 < 0.5.
  const StatusOr<Sizing> s = ComputeSizing(1000, 0.99, 86400, 86400);
  REQUIRE(s.ok());
  CHECK(s->k == 1);
}

TEST_CASE("ComputeSizing rejects bad input with a message naming it", "[bloom]") {
  auto error = [](int64_t n, double p, int64_t w, int64_t b) {
    const StatusOr<Sizing> s = ComputeSizing(n, p, w, b);
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    return s.status().message();
  };
  CHECK_THAT(error(0, 0.01, 86400, 86400), Catch::Contains("items_per_bucket"));
  CHECK_THAT(error(-5, 0.01, 86400, 86400), Catch::Contains("-5"));
  CHECK_THAT(error(200, 0.0, 86400, 86400), Catch::Contains("fpr"));
  CHECK_THAT(error(200, 1.0, 86400, 86400), Catch::Contains("fpr"));
  CHECK_THAT(error(200, -0.1, 86400, 86400), Catch::Contains("fpr"));
  CHECK_THAT(error(200, std::nan(""), 86400, 86400), Catch::Contains("fpr"));
  const std::string not_multiple = error(200, 0.01, 100000, 86400);
  CHECK_THAT(not_multiple, Catch::Contains("100000") && Catch::Contains("86400"));
  CHECK_THAT(error(200, 0.01, 0, 86400), Catch::Contains("window"));
  CHECK_THAT(error(200, 0.01, 86400, 0), Catch::Contains("bucket"));
  CHECK_THAT(error(200, 0.01, -86400, 86400), Catch::Contains("window"));
  // ~10^9 items at 1e-9 needs far more than 2^32 bits.
  const std::string too_big = error(1000000000, 1e-9, 30 * 86400, 86400);
  CHECK_THAT(too_big,
             Catch::Contains("2^32") && Catch::Contains("fewer") && Catch::Contains("higher fpr"));
}

TEST_CASE("ComputeSizing: m just below 2^32 is accepted", "[bloom]") {
  // m = ceil(n * 1.44 * log2(1/p_b)); with B = 2, p = 0.5, p_b = 1 - sqrt(0.5).
  // Find the largest n that still fits and check the boundary both ways.
  int64_t lo = 1, hi = 4000000000;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (ComputeSizing(mid, 0.5, 3600, 3600).ok()) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const StatusOr<Sizing> s = ComputeSizing(lo, 0.5, 3600, 3600);
  REQUIRE(s.ok());
  CHECK(uint64_t{s->m} > 0xff000000ULL);
  CHECK_FALSE(ComputeSizing(lo + 1, 0.5, 3600, 3600).ok());
}

// ---------------------------------------------------------------------------
// Keys

constexpr int64_t kDay = 86400;
constexpr int64_t kHour = 3600;

TEST_CASE("BucketStart floors, also for negative times", "[bloom]") {
  CHECK(BucketStart(1763800000, kDay) == 1763769600);  // 2025-11-22T00:00Z
  CHECK(BucketStart(1763769600, kDay) == 1763769600);  // exact start stays
  CHECK(BucketStart(1763769599, kDay) == 1763683200);
  CHECK(BucketStart(1763800000, kHour) == 1763798400);
  CHECK(BucketStart(0, kDay) == 0);
  CHECK(BucketStart(-1, kDay) == -kDay);
  CHECK(BucketStart(-kDay, kDay) == -kDay);
  CHECK(BucketStart(-kDay - 1, kDay) == -2 * kDay);
  CHECK(BucketStart(-1, kHour) == -kHour);
}

TEST_CASE("FormatBucket: known dates, days and hours", "[bloom]") {
  CHECK(FormatBucket(BucketStart(1763800000, kDay), kDay) == "20251122");
  CHECK(FormatBucket(BucketStart(1763800000, kHour), kHour) == "2025112208");
  CHECK(FormatBucket(0, kDay) == "19700101");
  CHECK(FormatBucket(0, kHour) == "1970010100");
  CHECK(FormatBucket(BucketStart(1763855999, kHour), kHour) == "2025112223");
  CHECK(FormatBucket(946684800, kDay) == "20000101");   // 2000-01-01
  CHECK(FormatBucket(951782400, kDay) == "20000229");   // 2000 is a leap year
  CHECK(FormatBucket(1709164800, kDay) == "20240229");  // 2024-02-29
  CHECK(FormatBucket(1709164800 + kDay, kDay) == "20240301");
  CHECK(FormatBucket(1677542400 + kDay, kDay) == "20230301");  // 2023-02-28 + 1 day
  CHECK(FormatBucket(4107542400 - kDay, kDay) == "21000228");  // 2100 is not leap
  CHECK(FormatBucket(4107542400, kDay) == "21000301");
  CHECK(FormatBucket(1735689600 - kHour, kHour) == "2024123123");  // New Year's Eve
  CHECK(FormatBucket(253402300799 - 3599, kHour) == "9999123123");
  // Multi-day and multi-hour spans keep the same naming rule.
  CHECK(FormatBucket(BucketStart(1763800000, 7 * kDay), 7 * kDay) == "20251120");
  CHECK(FormatBucket(BucketStart(1763800000, 6 * kHour), 6 * kHour) == "2025112206");
}

TEST_CASE("FormatBucket before the epoch", "[bloom]") {
  CHECK(FormatBucket(BucketStart(-1, kDay), kDay) == "19691231");
  CHECK(FormatBucket(BucketStart(-1, kHour), kHour) == "1969123123");
  CHECK(FormatBucket(-kDay * 365, kDay) == "19690101");
  CHECK(FormatBucket(-2208988800, kDay) == "19000101");
  CHECK(FormatBucket(-62167219200, kDay) == "00000101");  // year 0 (1 BC)
  CHECK(FormatBucket(-62167219200 - kDay, kDay) == "-11231");
}

TEST_CASE("FormatBucket agrees with a day-by-day walk over 1969..2101", "[bloom]") {
  int year = 1969, month = 1, day = 1;
  auto days_in = [](int y, int m) {
    static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : kDays[m - 1];
  };
  int failures = 0;
  for (int64_t t = -365 * kDay; year < 2102; t += kDay) {
    char want[40];
    std::snprintf(want, sizeof want, "%04d%02d%02d", year, month, day);
    if (FormatBucket(t, kDay) != want && ++failures < 5) CHECK(FormatBucket(t, kDay) == want);
    if (++day > days_in(year, month)) {
      day = 1;
      if (++month > 12) {
        month = 1;
        ++year;
      }
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("MakeKey / AppendKey build <prefix>{<user>}:<bucket>", "[bloom]") {
  const int64_t day = BucketStart(1763800000, kDay);
  CHECK(MakeKey("ef:", "u1", day, kDay) == "ef:{u1}:20251122");
  CHECK(MakeKey("ef:", "u1", BucketStart(1763800000, kHour), kHour) == "ef:{u1}:2025112208");
  CHECK(MakeKey("", "42", day, kDay) == "{42}:20251122");
  std::string out = "keep:";
  AppendKey("ef:", "user with spaces", day, kDay, &out);
  CHECK(out == "keep:ef:{user with spaces}:20251122");
  CHECK(MetaKey("ef:") == "ef:meta");
}

TEST_CASE("CheckBucketSeconds accepts whole hours and days only", "[bloom]") {
  CHECK(CheckBucketSeconds(kHour).ok());
  CHECK(CheckBucketSeconds(6 * kHour).ok());
  CHECK(CheckBucketSeconds(kDay).ok());
  CHECK(CheckBucketSeconds(7 * kDay).ok());
  CHECK_FALSE(CheckBucketSeconds(0).ok());
  CHECK_FALSE(CheckBucketSeconds(-kDay).ok());
  CHECK_FALSE(CheckBucketSeconds(1800).ok());
  CHECK_THAT(CheckBucketSeconds(5400).message(), Catch::Contains("5400"));
}

TEST_CASE("LiveBuckets: B buckets, oldest first, and expiry agrees", "[bloom]") {
  const int64_t now = 1763800000;  // 2025-11-22T08:26:40Z
  const int64_t window = 30 * kDay;
  const std::vector<int64_t> live = LiveBuckets(now, window, kDay);
  REQUIRE(live.size() == 31);
  CHECK(FormatBucket(live.front(), kDay) == "20251023");
  CHECK(FormatBucket(live.back(), kDay) == "20251122");
  for (size_t i = 1; i < live.size(); ++i) CHECK(live[i] - live[i - 1] == kDay);
  CHECK(live.back() == BucketStart(now, kDay));
  CHECK(live.front() == BucketStart(now - window, kDay));
  // The oldest live bucket's key still exists at `now`; the one before is gone.
  CHECK(ExpireAt(live.front(), kDay, window) > now);
  CHECK(ExpireAt(live.front() - kDay, kDay, window) <= now);
  // Any event written at `now` lands in the newest bucket and stays for the window.
  CHECK(ExpireAt(BucketStart(now, kDay), kDay, window) == 1763769600 + kDay + window);
  CHECK(ExpireAt(BucketStart(now, kDay), kDay, window) - now >= window);

  // Exactly at a bucket boundary.
  const std::vector<int64_t> at_start = LiveBuckets(1763769600, window, kDay);
  CHECK(at_start.size() == 31);
  CHECK(at_start.front() == 1763769600 - window);

  // Hourly: 24h window -> 25 buckets.
  const std::vector<int64_t> hourly = LiveBuckets(now, kDay, kHour);
  REQUIRE(hourly.size() == 25);
  CHECK(FormatBucket(hourly.front(), kHour) == "2025112108");
  CHECK(FormatBucket(hourly.back(), kHour) == "2025112208");

  // Zero window: only the current bucket; negative now works too.
  CHECK(LiveBuckets(now, 0, kDay) == std::vector<int64_t>{1763769600});
  CHECK(LiveBuckets(-1, kDay, kDay) == std::vector<int64_t>{-2 * kDay, -kDay});
}

TEST_CASE("Every timestamp's key is live for at least the window", "[bloom]") {
  // Property over many (event time, query time) pairs: a query within the window
  // of the event checks the event's bucket, and that key has not expired.
  std::mt19937_64 rng(7);
  const int64_t window = 30 * kDay;
  for (int64_t bucket : {kHour, kDay, 6 * kHour}) {
    std::uniform_int_distribution<int64_t> ts_dist(-400 * kDay, 20000 * kDay);
    std::uniform_int_distribution<int64_t> age_dist(0, window);
    for (int i = 0; i < 2000; ++i) {
      const int64_t event = ts_dist(rng);
      const int64_t now = event + age_dist(rng);
      const int64_t start = BucketStart(event, bucket);
      const std::vector<int64_t> live = LiveBuckets(now, window, bucket);
      CHECK(live.size() == static_cast<size_t>(window / bucket + 1));
      CHECK(std::find(live.begin(), live.end(), start) != live.end());
      CHECK(ExpireAt(start, bucket, window) > now);
    }
  }
}

// ---------------------------------------------------------------------------
// Size report

TEST_CASE("FormatBytesHuman uses binary units", "[bloom]") {
  CHECK(FormatBytesHuman(0) == "0 B");
  CHECK(FormatBytesHuman(1023) == "1023 B");
  CHECK(FormatBytesHuman(1024) == "1.0 KiB");
  CHECK(FormatBytesHuman(1536) == "1.5 KiB");
  CHECK(FormatBytesHuman(uint64_t{12} * 1024 * 1024 * 1024 + 322122547) == "12.3 GiB");
  CHECK(FormatBytesHuman(UINT64_MAX) == "16.0 EiB");
}

TEST_CASE("Size report: text and JSON carry the same figures", "[bloom]") {
  const StatusOr<Sizing> s = ComputeSizing(200, 0.01, 30 * kDay, kDay);
  REQUIRE(s.ok());
  const uint64_t users = 100000000;
  const std::string text = FormatSizeReport(*s, 200, 0.01, 30 * kDay, kDay, users);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("3,345"));  // m
  CHECK_THAT(text, Catch::Contains("30d"));
  CHECK_THAT(text, Catch::Contains("1d"));
  CHECK_THAT(text, Catch::Contains("100,000,000"));
  CHECK_THAT(text, Catch::Contains("with Redis key overhead"));
  // 419 bytes * 31 keys * 1e8 users = 1,298,900,000,000 bytes = 1.2 TiB.
  CHECK_THAT(text, Catch::Contains("1,298,900,000,000 bytes (1.2 TiB)"));
  // + 64 bytes per key: (419 + 64) * 31 * 1e8 = 1,497,300,000,000.
  CHECK_THAT(text, Catch::Contains("1,497,300,000,000 bytes (1.4 TiB)"));
  CHECK(text.back() == '\n');

  // Values start in one column on every "  label  value" line.
  size_t column = std::string::npos;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("  ", 0) != 0) continue;
    const size_t value = line.find_first_not_of(' ', line.find("  ", 2));
    if (column == std::string::npos) column = value;
    CHECK(value == column);
  }

  const nlohmann::json j = SizeReportJson(*s, 200, 0.01, 30 * kDay, kDay, users);
  CHECK(j["contract_version"] == 1);
  CHECK(j["m"] == 3345);
  CHECK(j["k"] == 12);
  CHECK(j["buckets"] == 31);
  CHECK(j["window"] == "30d");
  CHECK(j["bucket"] == "1d");
  CHECK(j["users"] == users);
  CHECK(j["bytes_per_user_per_bucket"] == 419);
  CHECK(j["bytes_per_user_per_window"] == 419 * 31);
  CHECK(j["total_bytes"] == uint64_t{1298900000000});
  CHECK(j["total_bytes_with_key_overhead"] == uint64_t{1497300000000});
  CHECK(j["redis_key_overhead_bytes_per_key"] == 64);
  CHECK(j["total_human"] == "1.2 TiB");
  CHECK(j["bucket_fpr_target"].get<double>() == Approx(s->bucket_fpr));
  CHECK(j["window_fpr_expected"].get<double>() == Approx(s->expected_window_fpr));
  CHECK(j["fpr"].get<double>() == 0.01);
}

TEST_CASE("Size report totals beyond 64 bits are null in JSON, not saturated", "[bloom]") {
  const StatusOr<Sizing> s = ComputeSizing(200, 0.01, 30 * kDay, kDay);
  REQUIRE(s.ok());
  const nlohmann::json j = SizeReportJson(*s, 200, 0.01, 30 * kDay, kDay, UINT64_MAX);
  CHECK(j["total_bytes"].is_null());
  CHECK(j["total_bytes_with_key_overhead"].is_null());
  CHECK(j["total_bytes_exceeds_64_bits"] == true);
}

}  // namespace
}  // namespace ef
