// ReplyScanner: counts RESP2 replies in a byte stream without building reply
// objects, for the write pipeline, where replies are only checked for errors.
// Feed() appends bytes as they arrive; Next() consumes one complete top-level
// reply (nested arrays included) or returns kIncomplete and keeps the partial
// reply for the next Feed. Error replies ('-', top level or nested) are reported
// with their text; the bulk strings of an array reply can be had as offsets
// into the buffer (Array, for MGET without copying the values). The integers of
// a reply are summarised (how many, how many are 0, the first one): for
// `BITFIELD ... SET u1 p 1 ...` (an array of the old bits) and `SETBIT` (the old
// bit) that says which bits were already set, i.e. how many 0 -> 1 flips the
// command made. Allocation-free in steady state. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ef {

class ReplyScanner {
 public:
  enum class Result { kReply, kError, kIncomplete, kProtocolError };

  // The integers of one reply, at any depth (an integer reply itself, or the
  // elements of an array reply).
  struct Ints {
    uint32_t count = 0;  // integers in the reply
    uint32_t zeros = 0;  // of which equal to 0
    int64_t first = 0;   // the first integer (0 if count == 0)
  };

  // The elements of a top-level array reply that are bulk strings or nils (MGET's
  // reply), as offsets into the buffer: valid while the scanner holds (Hold)
  // until Reset or SwapBuffer, and then in the swapped-out buffer.
  struct Span {
    size_t offset = 0;
    size_t size = 0;  // a nil element: 0
  };
  struct Array {
    bool is_array = false;  // the reply was an array (else `elements` is empty)
    bool other = false;     // some element was neither a bulk string nor nil
    std::vector<Span> elements;
  };

  // Appends raw bytes received from the server.
  void Feed(const char* data, size_t len);
  // Space to receive into: Feed(nullptr, n) after writing n bytes there.
  char* PrepareWrite(size_t n);
  void Commit(size_t n) { size_ += n; }

  // Consumes one reply. kError: *error_text is the error's text (first error of
  // the reply if nested), a view into the buffer valid until the next Feed,
  // PrepareWrite or Reset. kProtocolError: the stream is not RESP (a line not
  // ended by CRLF, a bulk string whose payload is not followed by CRLF, an integer
  // or length that is not an int64, an unknown type byte, arrays nested deeper
  // than 8); every later call returns kProtocolError too, until Reset. The result
  // sequence does not depend on how the bytes were split across Feed calls. *ints (if
  // given) summarises the integers of the consumed reply (kReply or kError).
  // *array (if given) gets the reply's elements (see Array).
  Result Next(std::string_view* error_text, Ints* ints = nullptr, Array* array = nullptr);

  // Keeps every received byte where it is (PrepareWrite no longer moves unconsumed
  // bytes to the front), so that Array offsets stay valid, until Reset or
  // SwapBuffer.
  void Hold() { hold_ = true; }
  // Exchanges the buffer with *other (the Array offsets then point into *other),
  // then Reset()s. Passing the same string each time reuses both allocations.
  void SwapBuffer(std::string* other) {
    buf_.swap(*other);
    Reset();
  }

  // Drops everything buffered and any protocol error (after a connection was lost
  // or dropped): the scanner then reads a new stream.
  void Reset() {
    begin_ = size_ = 0;
    bad_ = false;
    hold_ = false;
    error_ = {};
  }
  size_t buffered() const { return size_ - begin_; }

 private:
  // Parses one value at *pos; false if incomplete. Sets bad_ on malformed input.
  bool ParseValue(size_t* pos, int depth);
  bool ParseLine(size_t* pos, std::string_view* line);

  std::string buf_;
  size_t begin_ = 0;  // start of unconsumed bytes
  size_t size_ = 0;   // end of received bytes
  bool bad_ = false;
  bool hold_ = false;
  std::string_view error_;
  Array* array_ = nullptr;  // the Next call's *array
  Ints ints_;
};

}  // namespace ef
