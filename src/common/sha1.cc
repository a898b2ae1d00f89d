#include "common/sha1.h"

#include <array>
#include <bit>
#include <cstdint>

namespace ef {

namespace {

void Block(const unsigned char* p, std::array<uint32_t, 5>* h) {
  uint32_t w[80];
  for (int t = 0; t < 16; ++t)
    w[t] = (uint32_t{p[4 * t]} << 24) | (uint32_t{p[4 * t + 1]} << 16) |
           (uint32_t{p[4 * t + 2]} << 8) | uint32_t{p[4 * t + 3]};
  for (int t = 16; t < 80; ++t) w[t] = std::rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  uint32_t a = (*h)[0], b = (*h)[1], c = (*h)[2], d = (*h)[3], e = (*h)[4];
  for (int t = 0; t < 80; ++t) {
    uint32_t f, k;
    if (t < 20) {
      f = (b & c) | (~b & d);
      k = 0x5a827999;
    } else if (t < 40) {
      f = b ^ c ^ d;
      k = 0x6ed9eba1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8f1bbcdc;
    } else {
      f = b ^ c ^ d;
      k = 0xca62c1d6;
    }
    const uint32_t temp = std::rotl(a, 5) + f + e + k + w[t];
    e = d;
    d = c;
    c = std::rotl(b, 30);
    b = a;
    a = temp;
  }
  (*h)[0] += a;
  (*h)[1] += b;
  (*h)[2] += c;
  (*h)[3] += d;
  (*h)[4] += e;
}

}  // namespace

std::string Sha1Hex(std::string_view data) {
  std::array<uint32_t, 5> h = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  for (; n >= 64; n -= 64, p += 64) Block(p, &h);
  // The tail, a 1 bit, zeros and the length in bits (big-endian): one or two blocks.
  unsigned char tail[128] = {};
  for (size_t i = 0; i < n; ++i) tail[i] = p[i];
  tail[n] = 0x80;
  const size_t blocks = n + 9 <= 64 ? 1 : 2;
  const uint64_t bits = uint64_t{data.size()} * 8;
  for (int i = 0; i < 8; ++i)
    tail[blocks * 64 - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  for (size_t b = 0; b < blocks; ++b) Block(tail + 64 * b, &h);
  static const char kHex[] = "0123456789abcdef";
  std::string out(40, '0');
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 8; ++j) out[8 * i + j] = kHex[(h[i] >> (28 - 4 * j)) & 0xf];
  return out;
}

}  // namespace ef
