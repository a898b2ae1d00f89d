// Transport: the bytes of one Redis connection, to and from a connected
// non-blocking socket, in plain text (PlainTransport) or through TLS
// (redis/tls.h). RedisConnection drives it with poll(): a call that cannot go
// on says which readiness of the socket it waits for (kWantRead, kWantWrite;
// TLS may need to read in order to write, and the other way round). The socket
// belongs to the caller: a transport never closes it. Thread-compatible.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace ef {

class Transport {
 public:
  enum class Io {
    kOk,         // n bytes moved (n > 0)
    kWantRead,   // nothing moved: call again once the socket is readable
    kWantWrite,  // nothing moved: call again once the socket is writable
    kClosed,     // the server closed the connection
    kError,      // failed: error() says why; the connection is unusable
  };
  struct Result {
    Io io = Io::kOk;
    size_t n = 0;
  };
  virtual ~Transport() = default;
  // Up to `len` bytes into buf (as many as are ready, possibly fewer).
  virtual Result Read(char* buf, size_t len) = 0;
  // Up to `len` bytes from data (possibly fewer). After kWantRead/kWantWrite,
  // the next call passes the same data and len.
  virtual Result Write(const char* data, size_t len) = 0;
  // True when bytes were received but not returned yet (held by TLS), so a
  // Read would return data without the socket being readable.
  virtual bool Pending() const { return false; }
  // One line for the last kError ("recv: Connection reset by peer", "TLS:
  // tlsv13 alert certificate required"), or "connection closed by server".
  const std::string& error() const { return error_; }
  // True when the last kError was refused by TLS itself (an alert from the
  // server, a certificate): reconnecting as before cannot help.
  bool tls_refused() const { return tls_refused_; }
  // TLS: the server asked for a client certificate during the handshake and we
  // have none (redis.tls.cert_file ""). A server that requires one then closes
  // the connection (TLS 1.3: after the handshake, with an alert that a reset
  // may overtake).
  bool client_cert_missing() const { return client_cert_missing_; }

 protected:
  std::string error_;
  bool tls_refused_ = false;
  bool client_cert_missing_ = false;
};

// Plain TCP on `fd` (send with MSG_NOSIGNAL: no SIGPIPE).
std::unique_ptr<Transport> PlainTransport(int fd);

}  // namespace ef
