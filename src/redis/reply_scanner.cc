#include "redis/reply_scanner.h"

#include <climits>
#include <cstdint>
#include <cstring>

namespace ef {
namespace {

constexpr int kMaxDepth = 8;

// A RESP integer: an optional '-' and 1..19 digits that fit in int64 (a longer or
// larger number is not RESP, and accumulating it would overflow).
bool ParseInt(std::string_view s, long long* out) {
  const bool neg = !s.empty() && s[0] == '-';
  const size_t i0 = neg ? 1 : 0;
  if (s.size() == i0 || s.size() - i0 > 19) return false;
  unsigned long long v = 0;  // < 10^19 < 2^64: never wraps
  for (size_t i = i0; i < s.size(); ++i) {
    const unsigned d = static_cast<unsigned char>(s[i]) - unsigned{'0'};
    if (d > 9) return false;
    v = v * 10 + d;
  }
  if (v > (neg ? 9223372036854775808ull : 9223372036854775807ull)) return false;
  *out = neg ? static_cast<long long>(0 - v) : static_cast<long long>(v);
  return true;
}

// How a value's framing reads: whole, not all received yet, or not RESP.
enum class Frame { kWhole, kPartial, kBad };

// An integer reply (":<n>"), summarised into *ints; false if not RESP.
inline bool AddInt(std::string_view line, ReplyScanner::Ints* ints) {
  long long n = 0;
  if (!ParseInt(line, &n)) return false;
  if (ints->count++ == 0) ints->first = n;
  ints->zeros += n == 0;
  return true;
}

// A bulk string ("$<n>" then n bytes and CRLF from buf[p] on, of `size`
// received): *n its length (-1: nil).
inline Frame BulkFrame(std::string_view line, const char* buf, size_t size, size_t p,
                       long long* n) {
  if (!ParseInt(line, n) || *n < -1) return Frame::kBad;
  if (*n < 0) return Frame::kWhole;
  const size_t len = static_cast<size_t>(*n);
  if (size - p < len + 2) return Frame::kPartial;
  // The payload's CRLF.
  return buf[p + len] != '\r' || buf[p + len + 1] != '\n' ? Frame::kBad : Frame::kWhole;
}

// An array element of a bulk string at p of length n (-1: nil).
inline ReplyScanner::Span BulkSpan(size_t p, long long n) {
  return n >= 0 ? ReplyScanner::Span{p, static_cast<size_t>(n)} : ReplyScanner::Span{};
}

// An error reply's text ("ERR" for an empty one).
inline std::string_view ErrorText(std::string_view line) {
  return line.empty() ? std::string_view("ERR") : line;
}

// An array's header ("*<n>", -1: nil) at `depth`: false if not RESP or nested
// deeper than kMaxDepth.
inline bool ArrayLength(std::string_view line, int depth, long long* n) {
  return ParseInt(line, n) && *n >= -1 && depth < kMaxDepth;
}

}  // namespace

char* ReplyScanner::PrepareWrite(size_t n) {
  if (!hold_ && begin_ > 0 && (begin_ == size_ || begin_ > buf_.size() / 2)) {
    // Move the unconsumed tail to the front (usually a partial reply, or nothing).
    std::memmove(buf_.data(), buf_.data() + begin_, size_ - begin_);
    size_ -= begin_;
    begin_ = 0;
  }
  if (buf_.size() < size_ + n) buf_.resize(std::max(size_ + n, buf_.size() * 2));
  return buf_.data() + size_;
}

void ReplyScanner::Feed(const char* data, size_t len) {
  char* dst = PrepareWrite(len);
  std::memcpy(dst, data, len);
  Commit(len);
}

bool ReplyScanner::ParseLine(size_t* pos, std::string_view* line) {
  const char* start = buf_.data() + *pos;
  const void* cr = std::memchr(start, '\r', size_ - *pos);
  if (!cr) return false;
  size_t cr_at = static_cast<const char*>(cr) - buf_.data();
  if (cr_at + 1 >= size_) return false;  // need the '\n'
  if (buf_[cr_at + 1] != '\n') {
    bad_ = true;
    return false;
  }
  *line = std::string_view(start, cr_at - *pos);
  *pos = cr_at + 2;
  return true;
}

bool ReplyScanner::ParseValue(size_t* pos, int depth) {
  if (*pos >= size_) return false;
  const char type = buf_[*pos];
  size_t p = *pos + 1;
  std::string_view line;
  if (!ParseLine(&p, &line)) return false;
  if (array_ != nullptr && depth == 0 && type == '*') array_->is_array = true;
  const bool element = array_ != nullptr && depth == 1 && array_->is_array;
  if (element && type != '$') array_->other = true;
  long long n = 0;
  switch (type) {
    case '+':
      break;
    case ':':
      if (!AddInt(line, &ints_)) {
        bad_ = true;
        return false;
      }
      break;
    case '-':
      if (error_.empty()) error_ = ErrorText(line);
      break;
    case '$': {
      const Frame f = BulkFrame(line, buf_.data(), size_, p, &n);
      if (f != Frame::kWhole) {
        if (f == Frame::kBad) bad_ = true;
        return false;
      }
      if (element) array_->elements.push_back(BulkSpan(p, n));
      if (n >= 0) p += static_cast<size_t>(n) + 2;
      break;
    }
    case '*':
      if (!ArrayLength(line, depth, &n)) {
        bad_ = true;
        return false;
      }
      for (long long i = 0; i < n; ++i) {
        if (!ParseValue(&p, depth + 1)) return false;
      }
      break;
    default:
      bad_ = true;
      return false;
  }
  *pos = p;
  return true;
}

ReplyScanner::Result ReplyScanner::Next(std::string_view* error_text, Ints* ints, Array* array) {
  if (bad_) return Result::kProtocolError;
  error_ = {};
  ints_ = Ints{};
  array_ = array;
  if (array) {  // an incomplete reply is parsed again from its start next time
    array->is_array = array->other = false;
    array->elements.clear();
  }
  size_t pos = begin_;
  const bool complete = ParseValue(&pos, 0);
  array_ = nullptr;
  if (!complete) return bad_ ? Result::kProtocolError : Result::kIncomplete;
  begin_ = pos;
  if (ints) *ints = ints_;
  if (!error_.empty()) {
    if (error_text) *error_text = error_;
    return Result::kError;
  }
  return Result::kReply;
}

}  // namespace ef
