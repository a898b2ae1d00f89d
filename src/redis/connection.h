// RedisConnection: one connection to a Redis server, with pipelining, in plain
// text or over TLS (options().tls; redis/tls.h). hiredis connects the socket and
// parses the replies of Command/Commands; every byte goes through a Transport
// (redis/transport.h) on a non-blocking socket, with poll() for the timeouts.
// Connection failures and error replies are mapped once into RedisErrorKind
// here; callers act on Status codes: kUnavailable = retriable (I/O, timeout,
// LOADING, READONLY, OOM, MASTERDOWN, ...), kPermissionDenied =
// NOAUTH/WRONGPASS/NOPERM, or TLS refused (a certificate that does not verify,
// the server refusing ours): final until the config changes,
// kFailedPrecondition = other configuration (SELECT), kInvalidArgument = a TLS
// file (redis/tls.h CheckTlsFiles), kInternal = protocol. Only src/redis
// includes hiredis and OpenSSL. Thread-compatible.
//
// Retriable error replies split in two (CallsForReconnect):
// - READONLY (the server is a replica now: a failover happened) and MASTERDOWN
//   (a replica that lost its master): this server will not take our writes
//   whatever we wait. The caller drops the connection; the next connect
//   resolves the host name again, so a failover behind a DNS name or a VIP
//   reaches the new master.
// - LOADING (the server is loading its data set after a start), BUSY (a script
//   is running), TRYAGAIN, CLUSTERDOWN, OOM: the right server, not ready yet;
//   retrying on the same connection is enough. (If a server that is LOADING
//   comes up as a replica, its next answer is READONLY, which reconnects.)
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "redis/options.h"
#include "redis/reply_scanner.h"

namespace ef {

enum class RedisErrorKind {
  kNone = 0,
  kConnect,  // could not connect
  kIo,       // read/write failed, connection closed
  kTimeout,  // command_timeout elapsed
  kProtocol,
  kAuth,       // NOAUTH / WRONGPASS / NOPERM
  kOom,        // OOM reply: maxmemory reached
  kBusy,       // LOADING, BUSY, MASTERDOWN, READONLY, TRYAGAIN: server not ready
  kWrongType,  // WRONGTYPE: a key of ours holds another type
  kReply,      // any other error reply
  kCount_,
};
const char* RedisErrorKindName(RedisErrorKind k);  // "io", "timeout", ... (metric label)

// A reply converted to plain values (for the non-hot paths).
struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // string, status or error text
  long long integer = 0;
  std::vector<RedisReply> elements;
};

class RedisConnection {
 public:
  // Connects, runs the TLS handshake (options.tls.enabled; within
  // connect_timeout, counted from the start of the connect), AUTHs (username +
  // password, or password alone), SELECTs db and PINGs. Errors name the
  // address; auth or TLS refused = kPermissionDenied, e.g. "redis
  // 127.0.0.1:6380: TLS handshake failed: certificate verify failed
  // (self-signed certificate in certificate chain)". A timeout,
  // here or in any command, is reported with the timeout that fired, its value
  // and the time really waited, e.g. "redis 127.0.0.1:6379: PING: no answer
  // within redis.command_timeout (5000 ms); waited 5.00 s" (options'
  // *_timeout_name say where a timeout comes from).
  static StatusOr<std::unique_ptr<RedisConnection>> Connect(const RedisOptions& options);
  ~RedisConnection();

  const RedisOptions& options() const { return options_; }
  // The socket timeout of the next commands (ms > 0), e.g. what is left of a
  // caller's deadline. Pipeline() uses it too.
  // `name` (if not empty) replaces options().command_timeout_name in messages.
  void SetCommandTimeout(int64_t ms, const std::string& name = {});
  std::string address() const;

  // One command, one round trip. An error reply is returned as a reply of type
  // kError (not a failed status); failed status only for connection problems.
  StatusOr<RedisReply> Command(const std::vector<std::string>& args);

  // Several commands in one round trip, replies materialised (the writer's reads
  // of keys it does not know yet, the readers' MGETs). *replies is resized to the
  // number of commands; replies already in it are overwritten in place, reusing
  // their strings' capacity (keep the vector between calls to avoid allocating).
  // A failed status only for connection problems (then the connection is
  // unusable: reconnect; *replies holds the replies read before the failure).
  Status Commands(const std::vector<std::vector<std::string>>& commands,
                  std::vector<RedisReply>* replies);

  // Pipelining: sends `len` bytes of pre-formatted RESP commands and reads their
  // `count` replies. Sending and reading interleave (non-blocking socket, poll),
  // so replies are consumed while the request is still going out, and replies are
  // scanned, not materialised. Error replies are classified and returned in
  // *errors with the index of their command. Returns non-OK only when the
  // connection failed or went silent for command_timeout (then it is unusable:
  // reconnect). *ints (if given) is resized to `count`: the integers of each
  // reply, in command order (see ReplyScanner::Ints).
  struct ReplyError {
    size_t index;
    RedisErrorKind kind;
    std::string text;
  };
  Status Pipeline(const char* data, size_t len, size_t count, std::vector<ReplyError>* errors,
                  std::vector<ReplyScanner::Ints>* ints = nullptr);

  // Pipelined commands whose replies are arrays of bulk strings (MGET), read
  // without copying the values: sends `len` bytes of `count` RESP commands and
  // reads the replies as Pipeline does. (*replies)[i]: the i-th reply's error
  // text (an error reply), or its elements as views into *buffer (`bulks` false:
  // the reply was not an array of bulk strings and nils), which this call
  // swaps with the connection's receive buffer (pass the same string each call to
  // reuse both allocations; the views are valid until *buffer changes). A failed
  // status as Pipeline's.
  struct ArrayReply {
    std::string error;                     // an error reply's text, else empty
    bool bulks = false;                    // an array of bulk strings and nils
    std::vector<std::string_view> values;  // its elements (nil: empty)
  };
  Status ReadArrays(const char* data, size_t len, size_t count, std::string* buffer,
                    std::vector<ArrayReply>* replies);

  RedisErrorKind last_error_kind() const { return last_error_; }
  static RedisErrorKind ClassifyErrorReply(std::string_view text);
  // The status of a command that got error reply `text`, with message `msg`:
  // kPermissionDenied where Redis refused for good (NOAUTH, WRONGPASS, NOPERM:
  // retrying cannot help), else `otherwise`.
  static Status ErrorReplyStatus(std::string_view text, std::string msg,
                                 StatusCode otherwise = StatusCode::kUnavailable);
  // True for error replies after which this connection must be dropped (READONLY,
  // MASTERDOWN; see the top of this file).
  static bool CallsForReconnect(std::string_view error_text);

  struct Impl;

 private:
  explicit RedisConnection(RedisOptions options);
  Status Handshake();
  // Sends impl_->out (`count` commands in RESP) and reads their replies.
  template <typename What>
  Status SendAndRead(size_t count, std::vector<RedisReply>* replies, What what);
  template <typename What, typename Sink>
  Status Exchange(const char* data, size_t len, size_t count, What what, Sink& sink,
                  bool tell_replies);
  RedisOptions options_;
  std::unique_ptr<Impl> impl_;
  RedisErrorKind last_error_ = RedisErrorKind::kNone;
};

// Appends one command in RESP (the Redis wire protocol) to *out.
void AppendRespArrayHeader(size_t count, std::string* out);
void AppendRespBulk(std::string_view arg, std::string* out);
void AppendRespBulk(uint64_t number, std::string* out);

}  // namespace ef
