#include "write/class_create.h"

#include <algorithm>

#include "bloom/keys.h"

namespace ef {

// KEYS: the key, the previous bucket's, the one before. ARGV: expire_at, m, k,
// growth, k_step, stages, fill_ppm, the class count C, and per previous key 1 if
// it has a class (its bucket starts at or after v4_from), else 0.
// Integers in Lua's doubles are exact: every stage read ends inside a Redis
// string (below 2^32 bits), so m_s * k stays below 2^53 for k below 2^21.
const char kCreateClassKeyScript[] = R"lua(
local v = redis.call('GET', KEYS[1])
if v then return v end
local m, k = tonumber(ARGV[2]), tonumber(ARGV[3])
local growth, kstep, stages = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local fill, count = tonumber(ARGV[7]) / 1e6, tonumber(ARGV[8])
local function class_bits(c)
  return 8 * ((4 + c % 4) * 2 ^ (math.floor(c / 4) + 4) - 17)
end
local function class_limit(c)
  local mc, e = class_bits(c), 0
  while mc * 2 ^ e < m do e = e + 1 end
  while m * 2 ^ (1 - e) <= mc do e = e - 1 end
  return math.min(32, stages + e)
end
-- The estimate of a previous key's items (rule 11), or nil if it has none; and
-- the class its header names, if it has one.
local function estimate(key, classed)
  local len = redis.call('STRLEN', key)
  if len == 0 then return nil end
  local m0, limit, off, class = m, stages, 0, nil
  if classed == 1 then
    local h = string.byte(redis.call('GETRANGE', key, 0, 0))
    if h == 0 or h > count then return nil end
    class = h - 1
    m0, limit, off = class_bits(class), class_limit(class), 8
  end
  local n = 0
  for s = 0, limit - 1 do
    if s > 0 and len <= off / 8 then break end
    local ks = k + s * kstep
    local ms = math.floor((m0 * growth ^ s * ks + k - 1) / k)
    local x = redis.call('BITCOUNT', key, off / 8, math.floor((off + ms - 1) / 8))
    if x > ms - 1 then x = ms - 1 end
    n = n + -(ms / ks) * math.log(1 - x / ms)
    off = off + 8 * math.ceil(ms / 8)
  end
  return n, class
end
local est, prev = nil, nil
for i = 2, 3 do
  local e, class = estimate(KEYS[i], tonumber(ARGV[7 + i]))
  if e and (not est or e < est) then est = e end
  if class and not prev then prev = class end
end
local c = 0
if est then
  while c < count - 1 and -(class_bits(c) / k) * math.log(1 - fill) < est / 3 do c = c + 1 end
  -- Hysteresis: the newer previous key's class when at most one above.
  if prev and prev >= c and prev <= c + 1 then c = prev end
else
  while c < count - 1 and class_bits(c) < m do c = c + 1 end
end
v = string.char(c + 1) .. string.rep('\0', class_bits(c) / 8)
redis.call('SET', KEYS[1], v)
redis.call('EXPIREAT', KEYS[1], ARGV[1])
return v
)lua";

const char kGrowClassKeyScript[] = R"lua(
local v = redis.call('GET', KEYS[1])
local n = tonumber(ARGV[1])
if not v or #v >= n then return 0 end
redis.call('SET', KEYS[1], v .. string.rep('\0', n - #v), 'KEEPTTL')
return 1
)lua";

std::vector<std::string> ClassKeyCall(const Layout& l, std::string_view key, int64_t bucket_start) {
  // The key ends in its bucket's name (keys.h), whose length is fixed for a span.
  const size_t name = FormatBucket(bucket_start, l.bucket_seconds).size();
  const std::string_view stem = key.substr(0, key.size() - std::min(name, key.size()));
  std::vector<std::string> args;
  args.reserve(3 + 10);
  args.emplace_back(key);
  for (int back = 1; back <= 2; ++back)
    args.push_back(std::string(stem) +
                   FormatBucket(bucket_start - back * l.bucket_seconds, l.bucket_seconds));
  for (uint64_t v :
       {static_cast<uint64_t>(ExpireAt(bucket_start, l.bucket_seconds, l.window_seconds)),
        uint64_t{l.m}, uint64_t{l.k}, uint64_t{l.growth}, uint64_t{l.k_step}, uint64_t{l.stages},
        uint64_t{l.fill_ppm}, uint64_t{l.class_tables.size()}})
    args.push_back(std::to_string(v));
  for (int back = 1; back <= 2; ++back)
    args.push_back(l.HasClass(bucket_start - back * l.bucket_seconds) ? "1" : "0");
  return args;
}

std::vector<std::string> CreateClassKeyArgs(const Layout& l, const std::string& user,
                                            int64_t bucket_start) {
  std::vector<std::string> args = {"EVAL", kCreateClassKeyScript, "3"};
  for (std::string& a :
       ClassKeyCall(l, MakeKey(l.prefix, user, bucket_start, l.bucket_seconds), bucket_start))
    args.push_back(std::move(a));
  return args;
}

}  // namespace ef
