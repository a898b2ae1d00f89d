// The write path's pieces that need no server: ReplyScanner (RESP replies
// counted, split anywhere, errors found, integers summarised), ExpireCache (when
// EXPIREAT may be skipped) and which error replies call for a reconnect. The
// writer against a real Redis: tests/integration/redis_writer_test.cc.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.h"
#include "redis/reply_scanner.h"
#include "write/expire_cache.h"

namespace ef {
namespace {

struct Scanned {
  size_t replies = 0;
  std::vector<std::pair<size_t, std::string>> errors;
  bool protocol_error = false;
  size_t left_over = 0;  // bytes of an incomplete reply
};

// Feeds `stream` in pieces of the given sizes (cycled) and scans after each.
Scanned ScanInPieces(const std::string& stream, const std::vector<size_t>& pieces) {
  ReplyScanner scanner;
  Scanned out;
  size_t at = 0;
  size_t piece = 0;
  while (at < stream.size() && !out.protocol_error) {
    size_t n = std::min(pieces[piece++ % pieces.size()], stream.size() - at);
    scanner.Feed(stream.data() + at, n);
    at += n;
    for (;;) {
      std::string_view text;
      auto r = scanner.Next(&text);
      if (r == ReplyScanner::Result::kIncomplete) break;
      if (r == ReplyScanner::Result::kProtocolError) {
        out.protocol_error = true;
        break;
      }
      if (r == ReplyScanner::Result::kError)
        out.errors.emplace_back(out.replies, std::string(text));
      ++out.replies;
    }
  }
  out.left_over = scanner.buffered();
  return out;
}

const std::string kStream =
    "*3\r\n:0\r\n:1\r\n:0\r\n"  // BITFIELD reply
    ":1\r\n"                    // EXPIREAT
    "+OK\r\n"                   //
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    "$5\r\nhello\r\n"                                   // bulk
    "$-1\r\n"                                           // nil
    "*-1\r\n"                                           // nil array
    "*0\r\n"                                            // empty array
    "*2\r\n*2\r\n:1\r\n$3\r\na\r\n\r\n-ERR nested\r\n"  // nested, binary bulk with CRLF inside
    "$0\r\n\r\n";                                       // empty bulk

TEST_CASE("ReplyScanner: counts every reply and finds errors, whole or split anywhere", "[redis]") {
  Scanned whole = ScanInPieces(kStream, {kStream.size()});
  CHECK(whole.replies == 10);
  CHECK_FALSE(whole.protocol_error);
  CHECK(whole.left_over == 0);
  REQUIRE(whole.errors.size() == 2);
  CHECK(whole.errors[0].first == 3);
  CHECK(whole.errors[0].second.rfind("WRONGTYPE", 0) == 0);
  CHECK(whole.errors[1].first == 8);
  CHECK(whole.errors[1].second == "ERR nested");
  for (size_t step : {1, 2, 3, 5, 7, 13}) {
    Scanned split = ScanInPieces(kStream, {step});
    CHECK(split.replies == whole.replies);
    CHECK(split.errors == whole.errors);
    CHECK(split.left_over == 0);
  }
}

TEST_CASE("ReplyScanner: many BITFIELD replies through a small reused buffer", "[redis]") {
  std::mt19937 rng(7);
  std::string stream;
  size_t expected = 0;
  for (int i = 0; i < 5000; ++i) {
    int n = 1 + static_cast<int>(rng() % 40);
    stream += "*" + std::to_string(n) + "\r\n";
    for (int j = 0; j < n; ++j) stream += (rng() & 1) ? ":1\r\n" : ":0\r\n";
    stream += ":1\r\n";
    expected += 2;
  }
  Scanned s = ScanInPieces(stream, {4096, 17, 65536, 1});
  CHECK(s.replies == expected);
  CHECK(s.errors.empty());
}

TEST_CASE("ReplyScanner: bytes that are not RESP are a protocol error", "[redis]") {
  CHECK(ScanInPieces("HTTP/1.1 400 Bad Request\r\n", {64}).protocol_error);
  CHECK(ScanInPieces("$abc\r\n", {64}).protocol_error);
  CHECK(ScanInPieces(":1\n:2\r\n", {64}).protocol_error);
  Scanned partial = ScanInPieces("*2\r\n:1\r\n", {64});  // incomplete is not an error
  CHECK_FALSE(partial.protocol_error);
  CHECK(partial.replies == 0);
  CHECK(partial.left_over == 8);
}

TEST_CASE("ReplyScanner: the values of MGET replies as offsets, split anywhere, no copies",
          "[redis]") {
  std::mt19937 rng(11);
  // Replies of three MGETs: values of random bytes (CRLF included) and sizes, nils;
  // then an error reply and an array with an element that is not a bulk string.
  std::vector<std::vector<std::string>> values(3);
  std::string stream;
  for (auto& reply : values) {
    const size_t n = 1 + rng() % 40;
    stream += "*" + std::to_string(n) + "\r\n";
    for (size_t i = 0; i < n; ++i) {
      std::string v(rng() % 3 == 0 ? 0 : rng() % 3000, '\0');
      for (char& c : v) c = static_cast<char>(rng() % 4 == 0 ? '\r' : rng());
      stream += v.empty() ? "$-1\r\n" : "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
      reply.push_back(std::move(v));
    }
  }
  stream += "-ERR wrong number of arguments\r\n*2\r\n$1\r\nx\r\n:5\r\n";
  for (size_t step : {stream.size(), size_t{1}, size_t{7}, size_t{4096}}) {
    INFO("pieces of " << step);
    ReplyScanner scanner;
    scanner.Hold();
    std::vector<ReplyScanner::Array> arrays(6);  // [5]: the Next calls after the last reply
    std::vector<ReplyScanner::Result> results;
    for (size_t at = 0; at < stream.size(); at += step) {
      scanner.Feed(stream.data() + at, std::min(step, stream.size() - at));
      std::string_view text;
      for (;;) {
        auto r = scanner.Next(&text, nullptr, &arrays[std::min<size_t>(results.size(), 5)]);
        if (r == ReplyScanner::Result::kIncomplete) break;
        results.push_back(r);
      }
    }
    REQUIRE(results.size() == 5);
    std::string buffer;
    scanner.SwapBuffer(&buffer);
    CHECK(scanner.buffered() == 0);
    for (size_t r = 0; r < 3; ++r) {
      CHECK(results[r] == ReplyScanner::Result::kReply);
      CHECK(arrays[r].is_array);
      CHECK_FALSE(arrays[r].other);
      REQUIRE(arrays[r].elements.size() == values[r].size());
      for (size_t i = 0; i < values[r].size(); ++i) {
        const ReplyScanner::Span e = arrays[r].elements[i];
        CHECK(std::string_view(buffer.data() + e.offset, e.size) == values[r][i]);
      }
    }
    CHECK(results[3] == ReplyScanner::Result::kError);
    CHECK_FALSE(arrays[3].is_array);
    CHECK(arrays[4].is_array);
    CHECK(arrays[4].other);
  }
}

TEST_CASE("ReplyScanner: summarises the integers of each reply (old bits of a write)", "[redis]") {
  const std::string stream =
      "*4\r\n:1\r\n:0\r\n:0\r\n:1\r\n"  // BITFIELD GET + 3 SETs: sentinel 1, two flips
      "*2\r\n:0\r\n:0\r\n"              // every old bit 0
      ":0\r\n"                          // SETBIT: a flip
      ":1\r\n"                          // EXPIREAT: key found
      "+OK\r\n"                         // no integers
      "*2\r\n*1\r\n:7\r\n$1\r\nx\r\n"   // nested: counted at any depth
      ":-9223372036854775808\r\n";      // the smallest 64-bit integer
  struct Want {
    uint32_t count, zeros;
    int64_t first;
  };
  const std::vector<Want> want = {{4, 2, 1}, {2, 2, 0}, {1, 1, 0},        {1, 0, 1},
                                  {0, 0, 0}, {1, 0, 7}, {1, 0, INT64_MIN}};
  for (size_t step : {stream.size(), size_t{1}, size_t{3}}) {
    ReplyScanner scanner;
    std::vector<ReplyScanner::Ints> got;
    for (size_t at = 0; at < stream.size(); at += step) {
      scanner.Feed(stream.data() + at, std::min(step, stream.size() - at));
      std::string_view text;
      ReplyScanner::Ints ints;
      while (scanner.Next(&text, &ints) == ReplyScanner::Result::kReply) got.push_back(ints);
    }
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("reply " << i << ", pieces of " << step);
      CHECK(got[i].count == want[i].count);
      CHECK(got[i].zeros == want[i].zeros);
      CHECK(got[i].first == want[i].first);
    }
  }
}

TEST_CASE("ReplyScanner: integers beyond 64 bits are a protocol error", "[redis]") {
  CHECK(ScanInPieces(":9223372036854775807\r\n", {64}).replies == 1);
  CHECK(ScanInPieces(":9223372036854775808\r\n", {64}).protocol_error);
  CHECK(ScanInPieces(":99999999999999999999\r\n", {64}).protocol_error);
  CHECK(ScanInPieces("$99999999999999999999999\r\n", {64}).protocol_error);
}

TEST_CASE("RedisConnection: READONLY and MASTERDOWN call for a reconnect, LOADING does not",
          "[redis]") {
  CHECK(
      RedisConnection::CallsForReconnect("READONLY You can't write against a read only replica."));
  CHECK(RedisConnection::CallsForReconnect(
      "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."));
  CHECK_FALSE(RedisConnection::CallsForReconnect("LOADING Redis is loading the dataset in memory"));
  CHECK_FALSE(RedisConnection::CallsForReconnect("BUSY Redis is busy running a script."));
  CHECK_FALSE(RedisConnection::CallsForReconnect("OOM command not allowed"));
  CHECK_FALSE(RedisConnection::CallsForReconnect("ERR READONLY in the middle"));
  CHECK(RedisConnection::ClassifyErrorReply("READONLY x") == RedisErrorKind::kBusy);
}

constexpr int64_t kNow = 1763800000;
constexpr int64_t kExpire = kNow + 30 * 86400;

TEST_CASE("ExpireCache: a remembered expiry is skipped until it changes or grows stale",
          "[redis]") {
  ExpireCache cache(100, 600);
  CHECK_FALSE(cache.Known("ef:{u1}:20400", kExpire, kNow));
  cache.Remember("ef:{u1}:20400", kExpire, kNow);
  CHECK(cache.Known("ef:{u1}:20400", kExpire, kNow + 10));
  CHECK_FALSE(cache.Known("ef:{u2}:20400", kExpire, kNow + 10));      // another key
  CHECK_FALSE(cache.Known("ef:{u1}:20400", kExpire + 1, kNow + 10));  // another expiry
  CHECK_FALSE(cache.Known("ef:{u1}:20400", kExpire, kNow + 600));     // refresh is due
  cache.Remember("ef:{u1}:20400", kExpire, kNow + 600);
  CHECK(cache.Known("ef:{u1}:20400", kExpire, kNow + 601));
  cache.Clear();
  CHECK_FALSE(cache.Known("ef:{u1}:20400", kExpire, kNow + 601));
}

TEST_CASE("ExpireCache: keeps the sentinel position - a forgotten key is not trusted", "[redis]") {
  ExpireCache cache(100, 600);
  cache.Remember("a", kExpire, kNow, 4242);
  cache.Remember("b", kExpire, kNow, 7);
  uint32_t sentinel = 0;
  REQUIRE(cache.Known("a", kExpire, kNow + 1, &sentinel));
  CHECK(sentinel == 4242);
  cache.Forget("a");
  CHECK_FALSE(cache.Known("a", kExpire, kNow + 1, &sentinel));
  CHECK(cache.Known("b", kExpire, kNow + 1, &sentinel));
  CHECK(sentinel == 7);
  cache.Forget("never-seen");  // no effect
  cache.Remember("a", kExpire, kNow + 2, 5);
  REQUIRE(cache.Known("a", kExpire, kNow + 3, &sentinel));
  CHECK(sentinel == 5);
  // An entry in the previous generation is forgotten too.
  ExpireCache small(4, 600);
  small.Remember("old", kExpire, kNow, 1);
  small.Remember("x", kExpire, kNow, 1);
  small.Remember("y", kExpire, kNow, 1);  // "old" and "x" move to the previous generation
  REQUIRE(small.Known("old", kExpire, kNow));
  small.Forget("old");
  CHECK_FALSE(small.Known("old", kExpire, kNow));
  CHECK(small.Known("x", kExpire, kNow));
}

TEST_CASE("ExpireCache: a key close to its expiry is never trusted", "[redis]") {
  ExpireCache cache(100, 600, 3600);
  cache.Remember("k", kNow + 3599, kNow);
  CHECK_FALSE(cache.Known("k", kNow + 3599, kNow));
  cache.Remember("k", kNow + 3600, kNow);
  CHECK(cache.Known("k", kNow + 3600, kNow));
}

TEST_CASE("ExpireCache: bounded by two generations - recent keys survive", "[redis]") {
  ExpireCache cache(1000, 600);
  for (int i = 0; i < 5000; ++i) cache.Remember("k" + std::to_string(i), kExpire, kNow);
  CHECK(cache.size() <= 1000);
  // The newest 500 (the current generation) are all known; the oldest are gone.
  for (int i = 4500; i < 5000; ++i) CHECK(cache.Known("k" + std::to_string(i), kExpire, kNow));
  for (int i = 0; i < 100; ++i) CHECK_FALSE(cache.Known("k" + std::to_string(i), kExpire, kNow));
}

TEST_CASE("ExpireCache: tables grow without losing entries", "[redis]") {
  ExpireCache cache(200000, 600);
  for (int i = 0; i < 50000; ++i) cache.Remember("k" + std::to_string(i), kExpire + i, kNow);
  CHECK(cache.size() == 50000);
  for (int i = 0; i < 50000; ++i) {
    CHECK(cache.Known("k" + std::to_string(i), kExpire + i, kNow));
    CHECK_FALSE(cache.Known("k" + std::to_string(i), kExpire + i + 1, kNow));
  }
  CHECK_FALSE(cache.Known("k50000", kExpire, kNow));
  cache.Remember("k7", kExpire, kNow + 1);  // an update, not a new entry
  CHECK(cache.size() == 50000);
  CHECK(cache.Known("k7", kExpire, kNow + 1));
}

TEST_CASE("ExpireCache: capacity 0 disables it", "[redis]") {
  ExpireCache cache(0, 600);
  cache.Remember("k", kExpire, kNow);
  CHECK_FALSE(cache.enabled());
  CHECK_FALSE(cache.Known("k", kExpire, kNow));
  CHECK(cache.size() == 0);
}

}  // namespace
}  // namespace ef
