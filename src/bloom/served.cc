#include "bloom/served.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace ef {

namespace {

uint32_t ReadU32(std::string_view v, size_t at) {
  uint32_t x = 0;
  for (int i = 3; i >= 0; --i) x = (x << 8) | static_cast<unsigned char>(v[at + i]);
  return x;
}

void PutU32(std::string* v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) (*v)[at + i] = static_cast<char>((x >> (8 * i)) & 0xff);
}

struct Header {
  uint32_t width = 0, capacity = 0, next = 0, filled = 0;
};

// The header of a valid ring, or false.
bool ReadHeader(std::string_view v, Header* h) {
  if (v.size() < kServedHeaderBytes) return false;
  if (static_cast<unsigned char>(v[0]) != 0x53 || v[1] != 1 || v[3] != 0) return false;
  h->width = static_cast<unsigned char>(v[2]);
  h->capacity = ReadU32(v, 4);
  h->next = ReadU32(v, 8);
  h->filled = ReadU32(v, 12);
  return h->width >= 2 && h->width <= 8 && h->capacity >= 1 && h->capacity <= kServedMaxCapacity &&
         h->next < h->capacity && h->filled <= h->capacity &&
         v.size() == kServedHeaderBytes + size_t{h->capacity} * h->width;
}

uint64_t ReadSlot(std::string_view v, size_t slot, uint32_t width) {
  const size_t at = kServedHeaderBytes + slot * width;
  uint64_t x = 0;
  for (size_t i = width; i-- > 0;) x = (x << 8) | static_cast<unsigned char>(v[at + i]);
  return x;
}

// Lua 5.1 with Redis's struct library (Redis 2.6 on; Debian 12 ships 7.0).
const char kScript[] = R"lua(-- exposure-filter served ring (docs/FORMAT.md rule 10)
local key = KEYS[1]
local cap = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local fps = ARGV[4]
local n = math.floor(#fps / w)
local nxt, filled = 0, 0
local ok = false
local head = redis.call('GETRANGE', key, 0, 15)
if #head == 16 and redis.call('STRLEN', key) == 16 + cap * w then
  local magic, rev, ww, zero, c, x, f = struct.unpack('<BBBBI4I4I4', head)
  if magic == 83 and rev == 1 and ww == w and zero == 0 and c == cap and x < cap and f <= cap then
    nxt, filled, ok = x, f, true
  end
end
if not ok then
  redis.call('SET', key, struct.pack('<BBBBI4I4I4', 83, 1, w, 0, cap, 0, 0) .. string.rep('\0', cap * w))
end
if n > cap then
  fps = string.sub(fps, (n - cap) * w + 1)
  n = cap
end
if n > 0 then
  local first = math.min(n, cap - nxt)
  redis.call('SETRANGE', key, 16 + nxt * w, string.sub(fps, 1, first * w))
  if n > first then redis.call('SETRANGE', key, 16, string.sub(fps, first * w + 1)) end
  nxt = (nxt + n) % cap
  filled = math.min(filled + n, cap)
  redis.call('SETRANGE', key, 8, struct.pack('<I4I4', nxt, filled))
end
redis.call('PEXPIRE', key, ttl)
return filled
)lua";

}  // namespace

std::string ServedKey(std::string_view prefix, std::string_view user) {
  std::string key;
  key.reserve(prefix.size() + user.size() + 9);
  key.append(prefix).append("{").append(user).append("}:served");
  return key;
}

uint32_t ServedWidth(uint32_t capacity, double fpr) {
  for (uint32_t w = 2; w < 8; ++w) {
    if (static_cast<double>(capacity) <= fpr * std::ldexp(1.0, static_cast<int>(8 * w))) return w;
  }
  return 8;
}

void AppendServedFingerprints(const Hash128* items, size_t n, uint32_t width, std::string* out) {
  const size_t at = out->size();
  out->resize(at + n * width);
  char* p = out->data() + at;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t fp = ServedFingerprint(items[i], width);
    for (uint32_t b = 0; b < width; ++b) *p++ = static_cast<char>((fp >> (8 * b)) & 0xff);
  }
}

std::string ApplyServed(std::string_view value, uint32_t capacity, uint32_t width,
                        std::string_view fps) {
  Header h;
  std::string out;
  if (ReadHeader(value, &h) && h.width == width && h.capacity == capacity) {
    out.assign(value);
  } else {
    out.assign(kServedHeaderBytes + size_t{capacity} * width, '\0');
    out[0] = 0x53;
    out[1] = 1;
    out[2] = static_cast<char>(width);
    PutU32(&out, 4, capacity);
    h = Header{width, capacity, 0, 0};
  }
  size_t n = fps.size() / width;
  if (n > capacity) {
    fps.remove_prefix((n - capacity) * width);
    n = capacity;
  }
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out.data() + kServedHeaderBytes + size_t{h.next} * width, fps.data() + i * width,
                width);
    h.next = (h.next + 1) % capacity;
  }
  h.filled = static_cast<uint32_t>(std::min<size_t>(h.filled + n, capacity));
  PutU32(&out, 8, h.next);
  PutU32(&out, 12, h.filled);
  return out;
}

const std::string& ServedScript() {
  static const std::string script(kScript);
  return script;
}

namespace {
inline uint64_t Mix(uint64_t fp) { return fp * 0x9e3779b97f4a7c15ull; }
}  // namespace

bool ServedSet::Parse(std::string_view value) {
  width_ = filled_ = 0;
  Header h;
  if (!ReadHeader(value, &h)) return false;
  width_ = h.width;
  filled_ = h.filled;
  if (filled_ == 0) return true;
  const size_t size = std::bit_ceil(size_t{2} * filled_);
  table_.assign(size, 0);
  mask_ = size - 1;
  const int shift = 64 - std::countr_zero(size);
  for (uint32_t s = 0; s < filled_; ++s) {
    const uint64_t fp = ReadSlot(value, s, width_);
    if (fp == 0) continue;  // not written by a conforming writer: matches nothing
    for (uint64_t i = Mix(fp) >> shift;; i = (i + 1) & mask_) {
      if (table_[i] == fp) break;
      if (table_[i] == 0) {
        table_[i] = fp;
        break;
      }
    }
  }
  return true;
}

bool ServedSet::Contains(Hash128 h) const {
  if (filled_ == 0) return false;
  const uint64_t fp = ServedFingerprint(h, width_);
  const int shift = 64 - std::countr_zero(table_.size());
  for (uint64_t i = Mix(fp) >> shift;; i = (i + 1) & mask_) {
    if (table_[i] == fp) return true;
    if (table_[i] == 0) return false;
  }
}

}  // namespace ef
