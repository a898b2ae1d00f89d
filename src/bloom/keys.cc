#include "bloom/keys.h"

#include <array>
#include <charconv>
#include <cstddef>

#include "common/printable.h"

namespace ef {
namespace {

constexpr int64_t kSecondsPerDay = 86400;
constexpr int64_t kSecondsPerHour = 3600;
// "YYYYMMDDHH" for 4-digit years; room for a signed 64-bit year as well.
constexpr size_t kMaxBucketChars = 32;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

struct CivilDate {
  int64_t year;
  unsigned month;  // 1..12
  unsigned day;    // 1..31
};

// Howard Hinnant's civil_from_days (proleptic Gregorian): exact for every int64
// day count we can meet, no tables, no locale, no gmtime_r state.
CivilDate CivilFromDays(int64_t days) {
  const int64_t z = days + 719468;  // shift the epoch to 0000-03-01
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned day = doy - (153 * mp + 2) / 5 + 1;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  const int64_t year = static_cast<int64_t>(yoe) + era * 400 + (month <= 2 ? 1 : 0);
  return CivilDate{year, month, day};
}

void Put2(char* p, unsigned v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// Writes the bucket name to buf and returns its length. Kept allocation-free
// because AppendKey runs once per (user, bucket) in the write path.
size_t FormatBucketTo(int64_t bucket_start_seconds, int64_t bucket_seconds, char* buf) {
  const int64_t days = FloorDiv(bucket_start_seconds, kSecondsPerDay);
  const int64_t second_of_day = bucket_start_seconds - days * kSecondsPerDay;
  const CivilDate date = CivilFromDays(days);
  size_t n = 0;
  if (date.year >= 0 && date.year <= 9999) {
    const unsigned y = static_cast<unsigned>(date.year);
    Put2(buf, y / 100);
    Put2(buf + 2, y % 100);
    n = 4;
  } else {
    n = static_cast<size_t>(std::to_chars(buf, buf + 20, date.year).ptr - buf);
  }
  Put2(buf + n, date.month);
  Put2(buf + n + 2, date.day);
  n += 4;
  if (bucket_seconds % kSecondsPerDay != 0) {
    Put2(buf + n, static_cast<unsigned>(second_of_day / kSecondsPerHour));
    n += 2;
  }
  return n;
}

// CRC16-CCITT as Redis Cluster uses it (XMODEM: polynomial 0x1021, initial value
// 0, no reflection, no final xor), one table lookup per byte.
constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    unsigned crc = i << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
    table[i] = static_cast<uint16_t>(crc);
  }
  return table;
}
constexpr std::array<uint16_t, 256> kCrc16Table = MakeCrc16Table();

uint16_t Crc16(std::string_view bytes) {
  uint16_t crc = 0;
  for (const char c : bytes) {
    crc = static_cast<uint16_t>((crc << 8) ^
                                kCrc16Table[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

}  // namespace

int64_t BucketStart(int64_t ts_seconds, int64_t bucket_seconds) {
  return FloorDiv(ts_seconds, bucket_seconds) * bucket_seconds;
}

std::string FormatBucket(int64_t bucket_start_seconds, int64_t bucket_seconds) {
  char buf[kMaxBucketChars];
  return std::string(buf, FormatBucketTo(bucket_start_seconds, bucket_seconds, buf));
}

void AppendKey(std::string_view prefix, std::string_view user, int64_t bucket_start_seconds,
               int64_t bucket_seconds, std::string* out) {
  char buf[kMaxBucketChars];
  const size_t n = FormatBucketTo(bucket_start_seconds, bucket_seconds, buf);
  AppendKeyWithBucketName(prefix, user, std::string_view(buf, n), out);
}

void AppendKeyWithBucketName(std::string_view prefix, std::string_view user,
                             std::string_view bucket_name, std::string* out) {
  out->reserve(out->size() + prefix.size() + user.size() + 3 + bucket_name.size());
  out->append(prefix);
  out->push_back('{');
  out->append(user);
  out->append("}:");
  out->append(bucket_name);
}

std::string MakeKey(std::string_view prefix, std::string_view user, int64_t bucket_start_seconds,
                    int64_t bucket_seconds) {
  std::string key;
  AppendKey(prefix, user, bucket_start_seconds, bucket_seconds, &key);
  return key;
}

std::vector<int64_t> LiveBuckets(int64_t now_seconds, int64_t window_seconds,
                                 int64_t bucket_seconds) {
  const int64_t first = BucketStart(now_seconds - window_seconds, bucket_seconds);
  const int64_t last = BucketStart(now_seconds, bucket_seconds);
  std::vector<int64_t> starts;
  starts.reserve(static_cast<size_t>((last - first) / bucket_seconds + 1));
  for (int64_t t = first; t <= last; t += bucket_seconds) starts.push_back(t);
  return starts;
}

std::vector<int64_t> ReadBuckets(int64_t now_seconds, int64_t window_seconds,
                                 int64_t bucket_seconds) {
  std::vector<int64_t> starts = LiveBuckets(now_seconds, window_seconds, bucket_seconds);
  starts.push_back(starts.back() + bucket_seconds);
  return starts;
}

Status CheckUserId(std::string_view user) {
  if (user.empty()) return InvalidArgument("user ID must not be empty");
  if (user.front() == '}') {
    return InvalidArgument("user ID \"" + Printable(user) +
                           "\" starts with '}': it has no valid key (the Redis Cluster hash tag "
                           "would be empty; docs/FORMAT.md rule 4)");
  }
  return Status::Ok();
}

uint16_t KeySlot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return Crc16(key) & 16383;
}

Status CheckBucketSeconds(int64_t bucket_seconds) {
  if (bucket_seconds <= 0 || bucket_seconds % kSecondsPerHour != 0) {
    return InvalidArgument("bucket (" + std::to_string(bucket_seconds) +
                           "s) must be a positive whole number of hours or days");
  }
  return Status::Ok();
}

}  // namespace ef
