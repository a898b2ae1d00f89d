#include "redis/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>

namespace ef {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using Ctx = std::unique_ptr<SSL_CTX, CtxFree>;

// The reason of the first error in OpenSSL's queue (its root cause, e.g.
// "certificate verify failed", "no start line"); the queue is cleared.
std::string TakeError() {
  const unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) return "unknown error";
  if (const char* reason = ERR_reason_error_string(first)) return reason;
  char buf[256];
  ERR_error_string_n(first, buf, sizeof buf);
  return buf;
}

// "" if `path` can be read as a file (dir false) or searched as a directory.
std::string Unreadable(const std::string& path, bool dir) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (dir && !S_ISDIR(st.st_mode)) return "not a directory";
  if (!dir && S_ISDIR(st.st_mode)) return "is a directory";
  if (access(path.c_str(), dir ? (R_OK | X_OK) : R_OK) != 0) return std::strerror(errno);
  return "";
}

Status FileError(const char* key, const std::string& path, const std::string& why) {
  return InvalidArgument(std::string(key) + ": cannot read '" + path + "': " + why);
}

// A context with what `tls` names loaded.
StatusOr<Ctx> MakeContext(const TlsOptions& tls) {
  ERR_clear_error();
  Ctx ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return Internal("TLS: cannot create a context: " + TakeError());
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  // Writes may stop part way (non-blocking socket) and resume from where the
  // caller's buffer is then.
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  // A server that closes without close_notify has closed the connection (RESP
  // is framed: a cut reply is seen as incomplete, never as a whole one).
  SSL_CTX_set_options(c, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
  SSL_CTX_set_read_ahead(c, 1);  // one recv per socket buffer, not two per record
  // An encrypted key must not make OpenSSL ask for a passphrase on the terminal.
  SSL_CTX_set_default_passwd_cb(c, [](char*, int, int, void*) { return 0; });
  SSL_CTX_set_verify(c, tls.verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  if (!tls.ca_file.empty()) {
    if (std::string why = Unreadable(tls.ca_file, false); !why.empty())
      return FileError("redis.tls.ca_file", tls.ca_file, why);
    if (SSL_CTX_load_verify_locations(c, tls.ca_file.c_str(), nullptr) != 1)
      return FileError("redis.tls.ca_file", tls.ca_file,
                       "no PEM certificate (" + TakeError() + ")");
  }
  if (!tls.ca_dir.empty()) {
    if (std::string why = Unreadable(tls.ca_dir, true); !why.empty())
      return FileError("redis.tls.ca_dir", tls.ca_dir, why);
    if (SSL_CTX_load_verify_locations(c, nullptr, tls.ca_dir.c_str()) != 1)
      return FileError("redis.tls.ca_dir", tls.ca_dir, TakeError());
  }
  if (tls.ca_file.empty() && tls.ca_dir.empty() && SSL_CTX_set_default_verify_paths(c) != 1)
    return Internal("TLS: cannot use the system's CA certificates: " + TakeError());
  if (!tls.cert_file.empty()) {
    if (std::string why = Unreadable(tls.cert_file, false); !why.empty())
      return FileError("redis.tls.cert_file", tls.cert_file, why);
    if (std::string why = Unreadable(tls.key_file, false); !why.empty())
      return FileError("redis.tls.key_file", tls.key_file, why);
    if (SSL_CTX_use_certificate_chain_file(c, tls.cert_file.c_str()) != 1)
      return FileError("redis.tls.cert_file", tls.cert_file,
                       "no PEM certificate (" + TakeError() + ")");
    auto mismatch = [&](const std::string& why) {
      return InvalidArgument("redis.tls.key_file: '" + tls.key_file +
                             "' does not match redis.tls.cert_file '" + tls.cert_file + "' (" +
                             why + ")");
    };
    if (SSL_CTX_use_PrivateKey_file(c, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
      const std::string why = TakeError();
      if (why == "key values mismatch") return mismatch(why);
      return FileError("redis.tls.key_file", tls.key_file,
                       "no unencrypted PEM private key (" + why + ")");
    }
    if (SSL_CTX_check_private_key(c) != 1) return mismatch(TakeError());
  }
  return ctx;
}

// The socket under the TLS connection: a BIO of our own, so that sends use
// MSG_NOSIGNAL (a library user's process may not ignore SIGPIPE) and EOF is
// known to OpenSSL.
struct Socket {
  int fd = -1;
  bool eof = false;
};

Socket* SocketOf(BIO* b) { return static_cast<Socket*>(BIO_get_data(b)); }

int BioWrite(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = send(SocketOf(b)->fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_write(b);
  return static_cast<int>(n);
}

int BioRead(BIO* b, char* buf, int len) {
  BIO_clear_retry_flags(b);
  ssize_t n;
  do {
    n = recv(SocketOf(b)->fd, buf, static_cast<size_t>(len), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) BIO_set_retry_read(b);
  if (n == 0) SocketOf(b)->eof = true;
  return static_cast<int>(n);
}

long BioCtrl(BIO* b, int cmd, long, void*) {
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_EOF:
      return SocketOf(b)->eof ? 1 : 0;
    default:
      return 0;
  }
}

int BioCreate(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* SocketMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ef redis socket");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    return m;
  }();
  return method;
}

int Clamp(size_t len) { return static_cast<int>(std::min<size_t>(len, INT_MAX)); }

class Tls final : public Transport {
 public:
  explicit Tls(int fd) { socket_.fd = fd; }
  ~Tls() override {
    if (ssl_) SSL_free(ssl_);  // frees the BIO too
  }

  // Takes a new SSL of ctx with our BIO; false if OpenSSL cannot allocate.
  bool Init(SSL_CTX* ctx) {
    ssl_ = SSL_new(ctx);
    if (!ssl_) return false;
    SSL_set_app_data(ssl_, this);
    BIO* bio = BIO_new(SocketMethod());
    if (!bio) return false;
    BIO_set_data(bio, &socket_);
    SSL_set_bio(ssl_, bio, bio);
    return true;
  }
  SSL* ssl() const { return ssl_; }
  // The server asked for our certificate and we have none (SSL_CTX's client
  // certificate callback, set when redis.tls.cert_file is "").
  static int NoClientCert(SSL* ssl, X509**, EVP_PKEY**) {
    static_cast<Tls*>(SSL_get_app_data(ssl))->client_cert_missing_ = true;
    return 0;
  }

  Result Read(char* buf, size_t len) override {
    if (deferred_) return Take();
    size_t total = 0;
    while (total < len) {
      ERR_clear_error();
      errno = 0;
      const int n = SSL_read(ssl_, buf + total, Clamp(len - total));
      if (n > 0) {
        total += static_cast<size_t>(n);
        continue;
      }
      const Result r = Failed(n, "recv");
      if (total == 0) return r;
      // Hand over what was read; a failure is reported by the next call.
      if (r.io == Io::kClosed || r.io == Io::kError) deferred_ = r;
      break;
    }
    return {Io::kOk, total};
  }

  Result Write(const char* data, size_t len) override {
    if (deferred_) return Take();
    ERR_clear_error();
    errno = 0;
    const int n = SSL_write(ssl_, data, Clamp(len));
    if (n > 0) return {Io::kOk, static_cast<size_t>(n)};
    return Failed(n, "send");
  }

  bool Pending() const override { return deferred_.has_value() || SSL_has_pending(ssl_) == 1; }

 private:
  Result Take() {
    const Result r = *deferred_;
    deferred_.reset();
    return r;
  }

  Result Failed(int ret, const char* op) {
    const int saved_errno = errno;
    switch (SSL_get_error(ssl_, ret)) {
      case SSL_ERROR_WANT_READ:
        return {Io::kWantRead, 0};
      case SSL_ERROR_WANT_WRITE:
        return {Io::kWantWrite, 0};
      case SSL_ERROR_ZERO_RETURN:
        error_ = "connection closed by server";
        return {Io::kClosed, 0};
      case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (saved_errno == 0 || socket_.eof) {
          error_ = "connection closed by server";
          return {Io::kClosed, 0};
        }
        error_ = std::string(op) + ": " + std::strerror(saved_errno);
        return {Io::kError, 0};
      default:
        error_ = "TLS: " + TakeError();
        tls_refused_ = true;
        return {Io::kError, 0};
    }
  }

  Socket socket_;
  SSL* ssl_ = nullptr;
  std::optional<Result> deferred_;
};

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Why the handshake failed, for a kPermissionDenied.
std::string Refusal(SSL* ssl, const std::string& name, bool verifying) {
  std::string reason = TakeError();
  const long verify = SSL_get_verify_result(ssl);
  if (verifying && verify != X509_V_OK) {
    reason = std::string("certificate verify failed (") + X509_verify_cert_error_string(verify);
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
      reason += ": the server's certificate is not for '" + name +
                "'; redis.tls.server_name sets the name to verify";
    reason += ")";
  } else if (reason == "wrong version number" || reason == "packet length too long" ||
             reason == "record layer failure") {
    reason += " (is it a TLS port?)";
  }
  return reason;
}

}  // namespace

Status CheckTlsFiles(const TlsOptions& tls) {
  auto ctx = MakeContext(tls);
  return ctx.ok() ? Status::Ok() : ctx.status();
}

StatusOr<std::unique_ptr<Transport>> TlsConnect(int fd, const std::string& host,
                                                const TlsOptions& tls,
                                                SteadyClock::time_point deadline,
                                                const std::function<std::string()>& no_answer) {
  auto ctx = MakeContext(tls);
  if (!ctx.ok()) return ctx.status();
  if (tls.cert_file.empty()) SSL_CTX_set_client_cert_cb(ctx->get(), Tls::NoClientCert);
  auto t = std::make_unique<Tls>(fd);
  if (!t->Init(ctx->get())) return Internal("TLS: cannot create a connection: " + TakeError());
  SSL* ssl = t->ssl();
  const std::string& name = tls.server_name.empty() ? host : tls.server_name;
  const bool ip = IsIpAddress(name);
  if (!ip) SSL_set_tlsext_host_name(ssl, name.c_str());
  if (tls.verify) {
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str());
    } else {
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(ssl, name.c_str());
    }
  }
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int r = SSL_connect(ssl);
    if (r == 1) return std::unique_ptr<Transport>(std::move(t));
    const int saved_errno = errno;
    const int err = SSL_get_error(ssl, r);
    short events = 0;
    if (err == SSL_ERROR_WANT_READ) {
      events = POLLIN;
    } else if (err == SSL_ERROR_WANT_WRITE) {
      events = POLLOUT;
    } else if (err == SSL_ERROR_SSL) {
      std::string why = Refusal(ssl, name, tls.verify);
      if (t->client_cert_missing())
        why += " (the server asks for a certificate: redis.tls.cert_file)";
      return PermissionDenied("TLS handshake failed: " + why);
    } else {
      ERR_clear_error();
      return Unavailable(
          std::string("TLS handshake failed: ") +
          (saved_errno == 0 ? "connection closed by server" : std::strerror(saved_errno)));
    }
    for (;;) {
      const int64_t left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now())
              .count();
      if (left <= 0) return Unavailable("TLS handshake: " + no_answer());
      pollfd pfd{fd, events, 0};
      const int pr = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT32_MAX)));
      if (pr < 0 && errno == EINTR) continue;
      if (pr < 0) return Unavailable(std::string("TLS handshake: poll: ") + std::strerror(errno));
      if (pr == 0) return Unavailable("TLS handshake: " + no_answer());
      break;
    }
  }
}

}  // namespace ef
