// TLS under Redis connections, with OpenSSL (the only file that includes it;
// Debian 12's hiredis 0.14 has no TLS). RedisConnection connects the socket,
// then TlsConnect runs the client handshake on it and returns the Transport
// its commands go through.
//
// What is checked: the server's certificate chain against redis.tls.ca_file /
// ca_dir (or the system's CAs), and that the certificate is for
// redis.tls.server_name (default: the host connected to; an IP address is
// matched against the certificate's IP addresses), unless redis.tls.verify is
// false. SNI carries the name when it is not an IP address. TLS 1.2 or later.
// The files are read at every handshake (a rotated certificate is used from
// the next connect on).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "redis/options.h"
#include "redis/transport.h"

namespace ef {

// Loads what `tls` names as a handshake would: the CA file or directory, the
// certificate and its key, and that the two match. kInvalidArgument with one
// line naming the key, the path and why, e.g. "redis.tls.ca_file: cannot read
// '/x/ca.pem': No such file or directory", "redis.tls.key_file: '/x/c.key'
// does not match redis.tls.cert_file '/x/c.pem' (key values mismatch)".
Status CheckTlsFiles(const TlsOptions& tls);

// The client handshake on the connected socket `fd` (non-blocking; the caller
// keeps owning it) to `host`, within `deadline`. Errors (messages without the
// "redis host:port: " the caller puts first):
// - kPermissionDenied: TLS refused the peer or the peer refused us, which no
//   retry can change: "TLS handshake failed: certificate verify failed (unable
//   to get local issuer certificate)", "... (hostname mismatch: ...)",
//   "TLS handshake failed: wrong version number (is it a TLS port?)";
// - kInvalidArgument: a file of CheckTlsFiles;
// - kUnavailable: the connection closed or failed ("TLS handshake failed:
//   connection closed by server"), or the deadline passed: "TLS handshake: "
//   followed by no_answer() (which says which timeout and the time waited).
StatusOr<std::unique_ptr<Transport>> TlsConnect(int fd, const std::string& host,
                                                const TlsOptions& tls,
                                                std::chrono::steady_clock::time_point deadline,
                                                const std::function<std::string()>& no_answer);

}  // namespace ef
