// Raw TCP clients for tests that control the bytes on the wire (serve's HTTP).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace ef::test {

// A blocking TCP connection to 127.0.0.1:port with TCP_NODELAY and 10 s send and
// receive timeouts (a test that would hang fails instead). -1 if it fails.
int ConnectLoopback(int port);

// A slow client (slowloris): sends `bytes` over `fd` one byte every `every`
// until the server sends something, the bytes run out or `at_most` has passed;
// then reads until the server closes (or the socket's receive timeout). No
// Catch assertions: usable from any thread.
struct Trickled {
  size_t sent = 0;      // bytes sent
  std::string reply;    // what the server sent
  bool closed = false;  // the server ended the connection (end of stream or reset)
  int Status() const;   // the reply's HTTP status, -1 if none
};
Trickled Trickle(int fd, const std::string& bytes, std::chrono::milliseconds every,
                 std::chrono::milliseconds at_most);

}  // namespace ef::test
