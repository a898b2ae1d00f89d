#include "net/listen_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace ef::net {
namespace {

std::string LowerFirst(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

StatusOr<ListenAddress> ParseListen(const std::string& key, const std::string& listen) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    const char* end = listen.data() + listen.size();
    auto [p, ec] = std::from_chars(listen.data() + colon + 1, end, port);
    if (ec != std::errc() || p != end) port = -1;
  }
  if (colon == std::string::npos || port < 0 || port > 65535)
    return InvalidArgument(key + ": expected host:port, got '" + listen + "'");
  ListenAddress a;
  a.host = listen.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[') a.host = a.host.substr(1, a.host.size() - 2);
  if (a.host.empty()) a.host = "0.0.0.0";
  a.port = port;
  return a;
}

void SetListenSocketOptions(int fd) {
  const int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

std::string ListenError(const ListenAddress& address) {
  // As httplib resolves a listener's host (create_socket): any family, TCP.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(address.port);
  if (const int rc = getaddrinfo(address.host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return LowerFirst(gai_strerror(rc));
  std::string error = "cannot listen";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = LowerFirst(std::strerror(errno));
      continue;
    }
    SetListenSocketOptions(fd);
    const bool ok = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1) == 0;
    if (!ok) error = LowerFirst(std::strerror(errno));
    close(fd);
    if (ok) {
      error = "cannot listen";
      break;
    }
  }
  freeaddrinfo(found);
  return error;
}

}  // namespace ef::net
