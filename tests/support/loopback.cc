#include "support/loopback.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace ef::test {

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

int Trickled::Status() const {
  return reply.rfind("HTTP/1.", 0) == 0 && reply.size() >= 12 ? std::atoi(reply.c_str() + 9) : -1;
}

Trickled Trickle(int fd, const std::string& bytes, std::chrono::milliseconds every,
                 std::chrono::milliseconds at_most) {
  Trickled t;
  const auto end = std::chrono::steady_clock::now() + at_most;
  while (t.sent < bytes.size() && std::chrono::steady_clock::now() < end) {
    if (send(fd, bytes.data() + t.sent, 1, MSG_NOSIGNAL) != 1) break;
    ++t.sent;
    pollfd p{fd, POLLIN, 0};
    // The pause paces the client; it returns early when the server answers.
    if (poll(&p, 1, static_cast<int>(every.count())) != 0) break;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      t.reply.append(buf, static_cast<size_t>(n));
      continue;
    }
    t.closed = n == 0 || errno == ECONNRESET;
    break;
  }
  return t;
}

}  // namespace ef::test
