// libFuzzer target: ReplyScanner (redis/reply_scanner.h), the write pipeline's
// RESP reader. The input is the byte stream from the server; its first byte seeds
// the chunk sizes. Properties checked (a violation aborts: a libFuzzer finding):
// - the results (replies, error texts, protocol error, bytes left over) are the
//   same whether the stream arrives whole, in input-chosen chunks through Feed, or
//   one byte at a time through PrepareWrite/Commit;
// - they equal those of a plain reference parser of RESP2 written from the
//   contract in reply_scanner.h (so a scanner reading bytes it has not received
//   shows as a difference: the PrepareWrite path leaves junk past what it commits);
// - after Reset, a well-formed reply is read again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply_scanner.h"

namespace {

using Result = ef::ReplyScanner::Result;

struct Outcome {
  std::vector<std::pair<Result, std::string>> replies;  // kReply / kError (+ text)
  bool protocol_error = false;
  size_t left_over = 0;  // buffered bytes of an incomplete reply at the end
  bool operator==(const Outcome&) const = default;
};

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "reply_scanner_fuzz: %s\n", what);
  std::abort();
}

// Takes every complete reply; true once a protocol error is seen.
bool Drain(ef::ReplyScanner* scanner, Outcome* out) {
  for (;;) {
    std::string_view text;
    const Result r = scanner->Next(&text);
    if (r == Result::kIncomplete) return false;
    if (r == Result::kProtocolError) {
      out->protocol_error = true;
      return true;
    }
    out->replies.emplace_back(r, r == Result::kError ? std::string(text) : std::string());
  }
}

// Feeds `stream` in chunks (sizes from `seed`; 0 = whole) and drains after each.
Outcome ScanFeed(std::string_view stream, unsigned seed) {
  ef::ReplyScanner scanner;
  Outcome out;
  uint32_t state = seed * 2654435761u + 1;
  for (size_t at = 0; at < stream.size();) {
    size_t n = stream.size() - at;
    if (seed != 0) {
      state = state * 1103515245u + 12345u;
      n = std::min<size_t>(n, 1 + (state >> 16) % (1 + seed % 64));
    }
    scanner.Feed(stream.data() + at, n);
    at += n;
    if (Drain(&scanner, &out)) return out;
  }
  out.left_over = scanner.buffered();
  return out;
}

// One byte at a time through PrepareWrite/Commit, asking for more room than used
// and filling the rest with bytes that would parse if the scanner read them.
Outcome ScanPrepared(std::string_view stream) {
  ef::ReplyScanner scanner;
  Outcome out;
  for (char c : stream) {
    char* dst = scanner.PrepareWrite(16);
    std::memcpy(dst, "X\r\n:1\r\n+OK\r\n-E\r\n", 16);
    dst[0] = c;
    scanner.Commit(1);
    if (Drain(&scanner, &out)) return out;
  }
  out.left_over = scanner.buffered();
  return out;
}

// The reference: RESP2 as reply_scanner.h states it, on the whole stream.
class Reference {
 public:
  explicit Reference(std::string_view s) : s_(s) {}

  Outcome Run() {
    Outcome out;
    size_t pos = 0;
    for (;;) {
      first_error_.reset();
      size_t p = pos;
      const State st = Value(&p, 0);
      if (st == kBad) {
        out.protocol_error = true;
        return out;
      }
      if (st == kShort) {
        out.left_over = s_.size() - pos;
        return out;
      }
      pos = p;
      if (first_error_) {
        out.replies.emplace_back(Result::kError, *first_error_);
      } else {
        out.replies.emplace_back(Result::kReply, std::string());
      }
      if (pos == s_.size()) return out;
    }
  }

 private:
  enum State { kOk, kShort, kBad };

  State Line(size_t* p, std::string_view* line) {
    const size_t cr = s_.find('\r', *p);
    if (cr == std::string_view::npos || cr + 1 >= s_.size()) return kShort;
    if (s_[cr + 1] != '\n') return kBad;
    *line = s_.substr(*p, cr - *p);
    *p = cr + 2;
    return kOk;
  }

  static bool Int(std::string_view t, long long* v) {
    const bool neg = !t.empty() && t[0] == '-';
    if (neg) t.remove_prefix(1);
    if (t.empty() || t.size() > 19) return false;
    for (char c : t)
      if (c < '0' || c > '9') return false;
    const unsigned long long u = std::stoull(std::string(t));
    if (u > (neg ? 9223372036854775808ull : 9223372036854775807ull)) return false;
    *v = neg ? static_cast<long long>(0 - u) : static_cast<long long>(u);
    return true;
  }

  State Value(size_t* p, int depth) {
    if (*p >= s_.size()) return kShort;
    const char type = s_[*p];
    size_t q = *p + 1;
    std::string_view line;
    const State ls = Line(&q, &line);
    if (ls != kOk) return ls;
    long long n = 0;
    switch (type) {
      case '+':
        break;
      case '-':
        if (!first_error_) first_error_ = line.empty() ? std::string("ERR") : std::string(line);
        break;
      case ':':
        if (!Int(line, &n)) return kBad;
        break;
      case '$':
        if (!Int(line, &n) || n < -1) return kBad;
        if (n >= 0) {
          const size_t len = static_cast<size_t>(n);
          if (s_.size() - q < len + 2) return kShort;
          if (s_[q + len] != '\r' || s_[q + len + 1] != '\n') return kBad;
          q += len + 2;
        }
        break;
      case '*':
        if (!Int(line, &n) || n < -1 || depth >= 8) return kBad;
        for (long long i = 0; i < n; ++i) {
          const State es = Value(&q, depth + 1);
          if (es != kOk) return es;
        }
        break;
      default:
        return kBad;
    }
    *p = q;
    return kOk;
  }

  std::string_view s_;
  std::optional<std::string> first_error_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const unsigned seed = data[0];
  const std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = ScanFeed(stream, 0);
  if (!(ScanFeed(stream, seed | 1) == whole)) Fail("chunked feed differs from whole");
  if (stream.size() <= 1024 && !(ScanPrepared(stream) == whole))
    Fail("byte-by-byte PrepareWrite/Commit differs from whole");
  if (!(Reference(stream).Run() == whole)) Fail("differs from the reference parser");
  // Reset recovers from anything, a protocol error included.
  ef::ReplyScanner scanner;
  scanner.Feed(stream.data(), stream.size());
  Outcome ignored;
  Drain(&scanner, &ignored);
  scanner.Reset();
  scanner.Feed(":1\r\n", 4);
  std::string_view text;
  if (scanner.Next(&text) != Result::kReply || scanner.buffered() != 0)
    Fail("no reply after Reset");
  return 0;
}
