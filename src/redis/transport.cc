#include "redis/transport.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ef {
namespace {

class Plain final : public Transport {
 public:
  explicit Plain(int fd) : fd_(fd) {}

  Result Read(char* buf, size_t len) override {
    for (;;) {
      const ssize_t n = recv(fd_, buf, len, MSG_DONTWAIT);
      if (n > 0) return {Io::kOk, static_cast<size_t>(n)};
      if (n == 0) {
        error_ = "connection closed by server";
        return {Io::kClosed, 0};
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantRead, 0};
      error_ = std::string("recv: ") + std::strerror(errno);
      return {Io::kError, 0};
    }
  }

  Result Write(const char* data, size_t len) override {
    for (;;) {
      const ssize_t n = send(fd_, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) return {n > 0 ? Io::kOk : Io::kWantWrite, static_cast<size_t>(n)};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantWrite, 0};
      error_ = std::string("send: ") + std::strerror(errno);
      return {Io::kError, 0};
    }
  }

 private:
  int fd_;
};

}  // namespace

std::unique_ptr<Transport> PlainTransport(int fd) { return std::make_unique<Plain>(fd); }

}  // namespace ef
