#include "redis/connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

#include "redis/reply_scanner.h"

namespace ef {

struct RedisConnection::Impl {
  redisContext* ctx = nullptr;
  ReplyScanner scanner;                     // the write pipeline's reply reader
  std::vector<ReplyScanner::Array> arrays;  // ReadArrays: the replies' element offsets
  ~Impl() {
    if (ctx) redisFree(ctx);
  }
};

namespace {

timeval ToTimeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

// Converts into *out, reusing the capacity of its strings and elements (a
// caller that keeps its replies between calls allocates nothing in steady state).
void ConvertInto(const redisReply* r, RedisReply* out) {
  out->str.clear();
  out->integer = 0;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out->type = RedisReply::Type::kString;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out->type = RedisReply::Type::kStatus;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out->type = RedisReply::Type::kError;
      out->str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out->type = RedisReply::Type::kInteger;
      out->integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out->type = RedisReply::Type::kArray;
      break;
    default:
      out->type = RedisReply::Type::kNil;
  }
  const size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
  out->elements.resize(n);
  for (size_t i = 0; i < n; ++i) ConvertInto(r->element[i], &out->elements[i]);
}

RedisReply Convert(const redisReply* r) {
  RedisReply out;
  ConvertInto(r, &out);
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

using SteadyClock = std::chrono::steady_clock;

// "5.09 s": the time since start.
std::string Waited(SteadyClock::time_point start) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s",
                std::chrono::duration<double>(SteadyClock::now() - start).count());
  return buf;
}

// "no answer within redis.command_timeout (5000 ms); waited 5.00 s"
std::string NoAnswer(const std::string& name, int64_t ms, SteadyClock::time_point start) {
  return "no answer within " + name + " (" + std::to_string(ms) + " ms); waited " + Waited(start);
}

}  // namespace

const char* RedisErrorKindName(RedisErrorKind k) {
  switch (k) {
    case RedisErrorKind::kNone:
      return "none";
    case RedisErrorKind::kConnect:
      return "connect";
    case RedisErrorKind::kIo:
      return "io";
    case RedisErrorKind::kTimeout:
      return "timeout";
    case RedisErrorKind::kProtocol:
      return "protocol";
    case RedisErrorKind::kAuth:
      return "auth";
    case RedisErrorKind::kOom:
      return "oom";
    case RedisErrorKind::kBusy:
      return "busy";
    case RedisErrorKind::kWrongType:
      return "wrongtype";
    case RedisErrorKind::kReply:
      return "reply";
    case RedisErrorKind::kCount_:
      break;
  }
  return "unknown";
}

Status RedisConnection::ErrorReplyStatus(std::string_view text, std::string msg,
                                         StatusCode otherwise) {
  return Status(
      ClassifyErrorReply(text) == RedisErrorKind::kAuth ? StatusCode::kPermissionDenied : otherwise,
      std::move(msg));
}

RedisErrorKind RedisConnection::ClassifyErrorReply(std::string_view text) {
  if (StartsWith(text, "OOM")) return RedisErrorKind::kOom;
  if (StartsWith(text, "WRONGTYPE")) return RedisErrorKind::kWrongType;
  if (StartsWith(text, "NOAUTH") || StartsWith(text, "WRONGPASS") || StartsWith(text, "NOPERM"))
    return RedisErrorKind::kAuth;
  if (StartsWith(text, "LOADING") || StartsWith(text, "BUSY") || StartsWith(text, "MASTERDOWN") ||
      StartsWith(text, "READONLY") || StartsWith(text, "TRYAGAIN") ||
      StartsWith(text, "CLUSTERDOWN"))
    return RedisErrorKind::kBusy;
  return RedisErrorKind::kReply;
}

bool RedisConnection::CallsForReconnect(std::string_view error_text) {
  return StartsWith(error_text, "READONLY") || StartsWith(error_text, "MASTERDOWN");
}

RedisConnection::RedisConnection(RedisOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

RedisConnection::~RedisConnection() = default;

std::string RedisConnection::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

Status RedisConnection::ConnectionError(const std::string& what, SteadyClock::time_point start) {
  redisContext* c = impl_->ctx;
  int err = c ? c->err : REDIS_ERR_OTHER;
  std::string text = c ? c->errstr : "cannot allocate context";
  if (err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT)) {
    last_error_ = RedisErrorKind::kTimeout;
    text = NoAnswer(options_.command_timeout_name, options_.command_timeout_ms, start);
  } else if (err == REDIS_ERR_PROTOCOL) {
    last_error_ = RedisErrorKind::kProtocol;
  } else {
    last_error_ = RedisErrorKind::kIo;
  }
  if (err == REDIS_ERR_EOF) text = "connection closed by server";
  if (last_error_ == RedisErrorKind::kProtocol)
    return Internal("redis " + address() + ": " + what + ": protocol error: " + text);
  return Unavailable("redis " + address() + ": " + what + ": " + text);
}

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const RedisOptions& options) {
  std::unique_ptr<RedisConnection> conn(new RedisConnection(options));
  const SteadyClock::time_point start = SteadyClock::now();
  errno = 0;
  conn->impl_->ctx = redisConnectWithTimeout(options.host.c_str(), options.port,
                                             ToTimeval(options.connect_timeout_ms));
  if (!conn->impl_->ctx || conn->impl_->ctx->err) {
    conn->last_error_ = RedisErrorKind::kConnect;
    std::string why = conn->impl_->ctx ? conn->impl_->ctx->errstr : "out of memory";
    // hiredis 0.14 reports its connect timeout as ETIMEDOUT ("Connection timed out").
    if (errno == ETIMEDOUT || why == std::strerror(ETIMEDOUT))
      why = "no connection within " + options.connect_timeout_name + " (" +
            std::to_string(options.connect_timeout_ms) + " ms); waited " + Waited(start);
    return Unavailable("redis " + conn->address() + ": cannot connect: " + why);
  }
  redisSetTimeout(conn->impl_->ctx, ToTimeval(options.command_timeout_ms));
  redisEnableKeepAlive(conn->impl_->ctx);
  // Keep the read buffer between replies: by default hiredis frees it once empty
  // if it grew past 16 KiB, so every large reply (a reader's MGET of a user's
  // buckets) allocated, page-faulted and copied it anew.
  conn->impl_->ctx->reader->maxbuf = 0;
  EF_RETURN_IF_ERROR(conn->Handshake());
  return conn;
}

Status RedisConnection::Handshake() {
  auto expect_ok = [&](const std::vector<std::string>& args, const std::string& what) -> Status {
    auto r = Command(args);
    if (!r.ok()) return r.status();
    if (r->type == RedisReply::Type::kError) {
      RedisErrorKind kind = ClassifyErrorReply(r->str);
      last_error_ = kind;
      std::string msg = "redis " + address() + ": " + what + ": " + r->str;
      if (kind == RedisErrorKind::kAuth) return PermissionDenied(msg);
      if (kind == RedisErrorKind::kBusy) return Unavailable(msg);
      return FailedPrecondition(msg);
    }
    return Status::Ok();
  };
  if (!options_.password.empty()) {
    if (options_.username.empty()) {
      EF_RETURN_IF_ERROR(expect_ok({"AUTH", options_.password}, "AUTH"));
    } else {
      EF_RETURN_IF_ERROR(expect_ok({"AUTH", options_.username, options_.password},
                                   "AUTH as " + options_.username));
    }
  }
  if (options_.db != 0)
    EF_RETURN_IF_ERROR(expect_ok({"SELECT", std::to_string(options_.db)}, "SELECT"));
  return expect_ok({"PING"}, "PING");
}

void RedisConnection::SetCommandTimeout(int64_t ms, const std::string& name) {
  if (!name.empty()) options_.command_timeout_name = name;
  ms = std::max<int64_t>(ms, 1);
  if (ms == options_.command_timeout_ms) return;
  options_.command_timeout_ms = ms;
  redisSetTimeout(impl_->ctx, ToTimeval(ms));
}

StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  const SteadyClock::time_point start = SteadyClock::now();
  void* raw = redisCommandArgv(impl_->ctx, static_cast<int>(args.size()), argv.data(), lens.data());
  if (!raw) return ConnectionError(args.empty() ? "command" : args[0], start);
  RedisReply out = Convert(static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return out;
}

Status RedisConnection::Commands(const std::vector<std::vector<std::string>>& commands,
                                 std::vector<RedisReply>* replies) {
  const SteadyClock::time_point start = SteadyClock::now();
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& args : commands) {
    argv.clear();
    lens.clear();
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(impl_->ctx, static_cast<int>(args.size()), argv.data(),
                               lens.data()) != REDIS_OK)
      return ConnectionError(args.empty() ? "command" : args[0], start);
  }
  replies->resize(commands.size());  // existing replies are reused (ConvertInto)
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(impl_->ctx, &raw) != REDIS_OK || !raw) {
      replies->resize(i);
      return ConnectionError(commands[i].empty() ? "command" : commands[i][0], start);
    }
    ConvertInto(static_cast<redisReply*>(raw), &(*replies)[i]);
    freeReplyObject(raw);
  }
  return Status::Ok();
}

// The exchange under Pipeline and ReadArrays: sends data and calls
// next(reply_index) (which consumes the reply from scanner, or says it is
// incomplete) until `count` replies were consumed. The socket stays blocking for
// hiredis; sends and receives here do not block (MSG_DONTWAIT), and wait in poll.
template <typename NextReply>
Status RedisConnection::Exchange(const char* data, size_t len, size_t count, const char* what,
                                 NextReply next) {
  const int fd = impl_->ctx->fd;
  const SteadyClock::time_point start = SteadyClock::now();
  ReplyScanner& scanner = impl_->scanner;
  auto fail = [&](RedisErrorKind kind, const std::string& why) {
    last_error_ = kind;
    scanner.Reset();
    return Unavailable("redis " + address() + ": " + what + ": " + why);
  };
  constexpr size_t kReadChunk = 256 * 1024;
  constexpr size_t kWriteChunk = 1024 * 1024;
  const int timeout_ms =
      static_cast<int>(std::min<int64_t>(options_.command_timeout_ms, INT32_MAX));
  size_t written = 0;
  size_t replies = 0;
  bool readable = false;  // the last receive filled its chunk: more may be waiting
  // The first send goes out without a poll: an idle connection's send buffer has
  // room (a full one makes it fail with EAGAIN, and the loop polls then).
  bool send_first = len > 0;
  while (written < len || replies < count) {
    pollfd pfd{fd, static_cast<short>(POLLIN | (written < len ? POLLOUT : 0)), 0};
    if (send_first) {
      send_first = false;
      pfd.revents = POLLOUT;
    } else if (readable) {
      pfd.revents = POLLIN;
    } else {
      int pr = poll(&pfd, 1, timeout_ms);
      if (pr < 0) {
        if (errno == EINTR) continue;
        return fail(RedisErrorKind::kIo, std::string("poll: ") + std::strerror(errno));
      }
      if (pr == 0) {
        // (The timeout runs from the last data received or sent, not from start.)
        return fail(RedisErrorKind::kTimeout,
                    NoAnswer(options_.command_timeout_name, options_.command_timeout_ms, start) +
                        " (" + std::to_string(replies) + " of " + std::to_string(count) +
                        " replies received)");
      }
    }
    readable = false;
    if ((pfd.revents & POLLOUT) && written < len) {
      ssize_t n = send(fd, data + written, std::min(len - written, kWriteChunk),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        written += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return fail(RedisErrorKind::kIo, std::string("send: ") + std::strerror(errno));
      }
    }
    if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = recv(fd, scanner.PrepareWrite(kReadChunk), kReadChunk, MSG_DONTWAIT);
      if (n == 0) return fail(RedisErrorKind::kIo, "connection closed by server");
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
          return fail(RedisErrorKind::kIo, std::string("recv: ") + std::strerror(errno));
        continue;
      }
      scanner.Commit(static_cast<size_t>(n));
      readable = static_cast<size_t>(n) == kReadChunk;
      while (replies < count) {
        ReplyScanner::Result r = next(replies);
        if (r == ReplyScanner::Result::kIncomplete) break;
        if (r == ReplyScanner::Result::kProtocolError) {
          last_error_ = RedisErrorKind::kProtocol;
          scanner.Reset();
          return Internal("redis " + address() + ": " + what + ": protocol error in reply " +
                          std::to_string(replies));
        }
        ++replies;
      }
    }
  }
  if (scanner.buffered() != 0) {
    last_error_ = RedisErrorKind::kProtocol;
    scanner.Reset();
    return Internal("redis " + address() + ": " + what + ": more replies than commands");
  }
  return Status::Ok();
}

Status RedisConnection::Pipeline(const char* data, size_t len, size_t count,
                                 std::vector<ReplyError>* errors,
                                 std::vector<ReplyScanner::Ints>* ints) {
  ReplyScanner& scanner = impl_->scanner;
  if (ints) ints->resize(count);
  ReplyScanner::Ints* const reply_ints = ints ? ints->data() : nullptr;
  return Exchange(data, len, count, "pipeline", [&](size_t i) {
    std::string_view text;
    ReplyScanner::Result r = scanner.Next(&text, reply_ints ? reply_ints + i : nullptr);
    if (r == ReplyScanner::Result::kError && errors)
      errors->push_back({i, ClassifyErrorReply(text), std::string(text)});
    return r;
  });
}

Status RedisConnection::ReadArrays(const char* data, size_t len, size_t count, std::string* buffer,
                                   std::vector<ArrayReply>* replies) {
  ReplyScanner& scanner = impl_->scanner;
  std::vector<ReplyScanner::Array>& arrays = impl_->arrays;
  if (arrays.size() < count) arrays.resize(count);
  replies->resize(count);
  for (ArrayReply& r : *replies) {
    r.error.clear();
    r.bulks = false;
    r.values.clear();
  }
  scanner.Hold();  // the arrays' offsets stay valid until SwapBuffer
  Status st = Exchange(data, len, count, "MGET", [&](size_t i) {
    std::string_view text;
    ReplyScanner::Result r = scanner.Next(&text, nullptr, &arrays[i]);
    if (r == ReplyScanner::Result::kError) (*replies)[i].error.assign(text.empty() ? "ERR" : text);
    return r;
  });
  if (!st.ok()) return st;  // Exchange Reset the scanner
  scanner.SwapBuffer(buffer);
  for (size_t i = 0; i < count; ++i) {
    ArrayReply& r = (*replies)[i];
    if (!r.error.empty()) continue;
    r.bulks = arrays[i].is_array && !arrays[i].other;
    for (const ReplyScanner::Span& e : arrays[i].elements)
      r.values.emplace_back(buffer->data() + e.offset, e.size);
  }
  return Status::Ok();
}

void AppendRespArrayHeader(size_t count, std::string* out) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, count);
  out->push_back('*');
  out->append(buf, p);
  out->append("\r\n", 2);
}

void AppendRespBulk(std::string_view arg, std::string* out) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, arg.size());
  out->push_back('$');
  out->append(buf, p);
  out->append("\r\n", 2);
  out->append(arg.data(), arg.size());
  out->append("\r\n", 2);
}

void AppendRespBulk(uint64_t number, std::string* out) {
  char buf[24];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, number);
  AppendRespBulk(std::string_view(buf, p - buf), out);
}

}  // namespace ef
