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
  switch (type) {
    case '+':
      break;
    case ':': {
      long long n = 0;
      if (!ParseInt(line, &n)) {
        bad_ = true;
        return false;
      }
      if (ints_.count++ == 0) ints_.first = n;
      ints_.zeros += n == 0;
      break;
    }
    case '-':
      if (error_.empty()) error_ = line.empty() ? std::string_view("ERR") : line;
      break;
    case '$': {
      long long n = 0;
      if (!ParseInt(line, &n) || n < -1) {
        bad_ = true;
        return false;
      }
      if (n >= 0) {
        const size_t len = static_cast<size_t>(n);
        if (size_ - p < len + 2) return false;
        if (buf_[p + len] != '\r' || buf_[p + len + 1] != '\n') {  // the payload's CRLF
          bad_ = true;
          return false;
        }
        if (element) array_->elements.push_back({p, len});
        p += len + 2;
      } else if (element) {
        array_->elements.push_back({});
      }
      break;
    }
    case '*': {
      long long n = 0;
      if (!ParseInt(line, &n) || n < -1 || depth >= kMaxDepth) {
        bad_ = true;
        return false;
      }
      for (long long i = 0; i < n; ++i) {
        if (!ParseValue(&p, depth + 1)) return false;
      }
      break;
    }
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
