// ReplyScanner: counts RESP2 replies in a byte stream without building reply
// objects, for the write pipeline, where replies are only checked for errors.
// Feed() appends bytes as they arrive; Next() consumes one complete top-level
// reply (nested arrays included) or returns kIncomplete and keeps the partial
// reply for the next Feed. Error replies ('-', top level or nested) are reported
// with their text. Allocation-free in steady state. Not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ef {

class ReplyScanner {
 public:
  enum class Result { kReply, kError, kIncomplete, kProtocolError };

  // Appends raw bytes received from the server.
  void Feed(const char* data, size_t len);
  // Space to receive into: Feed(nullptr, n) after writing n bytes there.
  char* PrepareWrite(size_t n);
  void Commit(size_t n) { size_ += n; }

  // Consumes one reply. kError: *error_text is the error's text (first error of
  // the reply if nested). kProtocolError: the stream is not RESP.
  Result Next(std::string_view* error_text);

  // Drops everything buffered (after a connection was lost).
  void Reset() { begin_ = size_ = 0; }
  size_t buffered() const { return size_ - begin_; }

 private:
  // Parses one value at *pos; false if incomplete. Sets bad_ on malformed input.
  bool ParseValue(size_t* pos, int depth);
  bool ParseLine(size_t* pos, std::string_view* line);

  std::string buf_;
  size_t begin_ = 0;  // start of unconsumed bytes
  size_t size_ = 0;   // end of received bytes
  bool bad_ = false;
  std::string_view error_;
};

}  // namespace ef
