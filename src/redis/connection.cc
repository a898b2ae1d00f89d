#include "redis/connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

#include "redis/reply_scanner.h"
#include "redis/tls.h"
#include "redis/transport.h"

namespace ef {

struct RedisConnection::Impl {
  // hiredis connects the socket (name resolution, connect timeout, TCP_NODELAY,
  // keep-alive) and owns it; every byte after that goes through `transport`.
  redisContext* ctx = nullptr;
  std::unique_ptr<Transport> transport;
  ReplyScanner scanner;                     // the write pipeline's reply reader
  std::vector<ReplyScanner::Array> arrays;  // ReadArrays: the replies' element offsets
  // Command/Commands: hiredis' parser alone, fed what the transport reads.
  redisReader* reader = nullptr;
  std::unique_ptr<char[]> chunk;  // what one read of Commands brings
  std::string out;                // the commands of Commands in RESP
  ~Impl() {
    transport.reset();  // before the socket closes
    if (reader) redisReaderFree(reader);
    if (ctx) redisFree(ctx);
  }
  void ResetReader() {
    if (reader) redisReaderFree(reader);
    reader = redisReaderCreate();
    // Keep the read buffer between replies: by default hiredis frees it once
    // empty if it grew past 16 KiB, so every large reply (a reader's MGET of a
    // user's buckets) allocated, page-faulted and copied it anew.
    if (reader) reader->maxbuf = 0;
  }
};

namespace {

timeval ToTimeval(int64_t ms) {
  timeval tv;
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  return tv;
}

constexpr size_t kCommandsChunk = 64 * 1024;

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

// Commands' replies: hiredis' parser on what the transport reads.
struct ReaderSink {
  redisReader*& reader;
  char* chunk;
  std::vector<RedisReply>* replies;
  size_t done = 0;  // replies converted
  std::string protocol_error;

  size_t ChunkSize() const { return kCommandsChunk; }
  char* Prepare(size_t) { return chunk; }
  void Commit(size_t n) { redisReaderFeed(reader, chunk, n); }
  size_t Buffered() const { return reader->len - reader->pos; }
  void Reset() {
    redisReaderFree(reader);
    reader = redisReaderCreate();
    if (reader) reader->maxbuf = 0;
  }
  ReplyScanner::Result Next(size_t i) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
      protocol_error = reader->errstr;
      return ReplyScanner::Result::kProtocolError;
    }
    if (!raw) return ReplyScanner::Result::kIncomplete;
    ConvertInto(static_cast<redisReply*>(raw), &(*replies)[i]);
    freeReplyObject(raw);
    done = i + 1;
    return ReplyScanner::Result::kReply;
  }
};

// Pipeline's and ReadArrays' replies: scanned (ReplyScanner), not materialised.
template <typename NextFn>
struct ScannerSink {
  ReplyScanner& scanner;
  NextFn next;
  static constexpr size_t kReadChunk = 256 * 1024;
  size_t ChunkSize() const { return kReadChunk; }
  char* Prepare(size_t n) { return scanner.PrepareWrite(n); }
  void Commit(size_t n) { scanner.Commit(n); }
  size_t Buffered() const { return scanner.buffered(); }
  void Reset() { scanner.Reset(); }
  ReplyScanner::Result Next(size_t i) { return next(i); }
};

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

StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(const RedisOptions& options) {
  std::unique_ptr<RedisConnection> conn(new RedisConnection(options));
  Impl& impl = *conn->impl_;
  const SteadyClock::time_point start = SteadyClock::now();
  errno = 0;
  impl.ctx = redisConnectWithTimeout(options.host.c_str(), options.port,
                                     ToTimeval(options.connect_timeout_ms));
  if (!impl.ctx || impl.ctx->err) {
    conn->last_error_ = RedisErrorKind::kConnect;
    std::string why = impl.ctx ? impl.ctx->errstr : "out of memory";
    // hiredis 0.14 reports its connect timeout as ETIMEDOUT ("Connection timed out").
    if (errno == ETIMEDOUT || why == std::strerror(ETIMEDOUT))
      why = "no connection within " + options.connect_timeout_name + " (" +
            std::to_string(options.connect_timeout_ms) + " ms); waited " + Waited(start);
    return Unavailable("redis " + conn->address() + ": cannot connect: " + why);
  }
  redisEnableKeepAlive(impl.ctx);
  const int fd = impl.ctx->fd;
  if (const int flags = fcntl(fd, F_GETFL);
      flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    conn->last_error_ = RedisErrorKind::kConnect;
    return Unavailable("redis " + conn->address() +
                       ": cannot connect: fcntl: " + std::strerror(errno));
  }
  impl.ResetReader();
  if (!impl.reader) return Internal("redis " + conn->address() + ": out of memory");
  if (options.tls.enabled) {
    auto transport = TlsConnect(
        fd, options.host, options.tls,
        start + std::chrono::milliseconds(options.connect_timeout_ms),
        [&] { return NoAnswer(options.connect_timeout_name, options.connect_timeout_ms, start); });
    if (!transport.ok()) {
      conn->last_error_ = RedisErrorKind::kConnect;
      return transport.status().Prefixed("redis " + conn->address());
    }
    impl.transport = std::move(*transport);
  } else {
    impl.transport = PlainTransport(fd);
  }
  if (Status st = conn->Handshake(); !st.ok()) {
    // TLS 1.3: the server checks our certificate after our side of the
    // handshake is done, so its refusal (an alert) comes instead of the first
    // reply, or is overtaken by the reset of the connection it closed while our
    // first command was on its way: then the alert may still be there to read.
    Transport& transport = *impl.transport;
    if (options.tls.enabled && !transport.tls_refused()) {
      char buf[512];
      (void)transport.Read(buf, sizeof buf);
    }
    const std::string& error = transport.error();
    std::string why;
    if (transport.tls_refused() && error.rfind("TLS: ", 0) == 0) why = error.substr(5);
    if (transport.client_cert_missing()) {
      why += std::string(why.empty() ? "" : " ") +
             "(the server asks for a certificate: redis.tls.cert_file)";
    }
    // (Without a TLS error, only a connection the server closed is its refusal:
    // a timeout is not.)
    if (!why.empty() && (transport.tls_refused() || conn->last_error_ == RedisErrorKind::kIo)) {
      conn->last_error_ = RedisErrorKind::kConnect;
      return PermissionDenied("redis " + conn->address() + ": TLS handshake failed: " + why);
    }
    return st;
  }
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
  options_.command_timeout_ms = std::max<int64_t>(ms, 1);
}

StatusOr<RedisReply> RedisConnection::Command(const std::vector<std::string>& args) {
  std::string& out = impl_->out;
  out.clear();
  AppendRespArrayHeader(args.size(), &out);
  for (const auto& a : args) AppendRespBulk(std::string_view(a), &out);
  std::vector<RedisReply> replies;
  EF_RETURN_IF_ERROR(SendAndRead(
      1, &replies, [&](size_t) -> std::string { return args.empty() ? "command" : args[0]; }));
  return std::move(replies[0]);
}

Status RedisConnection::Commands(const std::vector<std::vector<std::string>>& commands,
                                 std::vector<RedisReply>* replies) {
  std::string& out = impl_->out;
  out.clear();
  for (const auto& args : commands) {
    AppendRespArrayHeader(args.size(), &out);
    for (const auto& a : args) AppendRespBulk(std::string_view(a), &out);
  }
  return SendAndRead(commands.size(), replies, [&](size_t i) -> std::string {
    return i < commands.size() && !commands[i].empty() ? commands[i][0] : "command";
  });
}

template <typename What>
Status RedisConnection::SendAndRead(size_t count, std::vector<RedisReply>* replies, What what) {
  std::string& out = impl_->out;
  if (!impl_->chunk) impl_->chunk = std::make_unique<char[]>(kCommandsChunk);
  replies->resize(count);  // existing replies are reused (ConvertInto)
  ReaderSink sink{impl_->reader, impl_->chunk.get(), replies};
  Status st = Exchange(out.data(), out.size(), count, what, sink, false);
  if (!st.ok()) {
    replies->resize(sink.done);
    if (!sink.protocol_error.empty())
      st = Internal("redis " + address() + ": " + what(sink.done) +
                    ": protocol error: " + sink.protocol_error);
  }
  // Keep the RESP buffer, not a huge one (a batch of large commands).
  if (out.capacity() > (1u << 20)) std::string().swap(out);
  return st;
}

namespace {

// Exchange's steps, over explicit values.
enum class Wait { kReady, kAgain, kError, kTimeout };

// Waits for *pfd (poll): kAgain when interrupted (EINTR), kError with errno set.
inline Wait PollFor(pollfd* pfd, int timeout_ms) {
  const int pr = poll(pfd, 1, timeout_ms);
  if (pr < 0) return errno == EINTR ? Wait::kAgain : Wait::kError;
  return pr == 0 ? Wait::kTimeout : Wait::kReady;
}

constexpr size_t kWriteChunk = 1024 * 1024;

// Writes the next chunk of data[*written, len); *write_wait: what the unfinished
// write waits for. False if the connection closed or failed (transport.error()).
inline bool WriteSome(Transport& transport, const char* data, size_t len, size_t* written,
                      short* write_wait) {
  const Transport::Result w =
      transport.Write(data + *written, std::min(len - *written, kWriteChunk));
  switch (w.io) {
    case Transport::Io::kOk:
      *written += w.n;
      *write_wait = POLLOUT;
      return true;
    case Transport::Io::kWantRead:
      *write_wait = POLLIN;
      return true;
    case Transport::Io::kWantWrite:
      *write_wait = POLLOUT;
      return true;
    case Transport::Io::kClosed:
    case Transport::Io::kError:
      break;
  }
  return false;
}

// Reads up to `chunk` bytes into `into`: *n of them; *read_wait: what the next
// read waits for.
inline Transport::Io ReadSome(Transport& transport, char* into, size_t chunk, short* read_wait,
                              size_t* n) {
  const Transport::Result r = transport.Read(into, chunk);
  *read_wait = r.io == Transport::Io::kWantWrite ? POLLOUT : POLLIN;
  *n = r.n;
  return r.io;
}

// Consumes the complete replies buffered in sink, up to `count` in all
// (*replies so far); kProtocolError stops at the bad one.
template <typename Sink>
inline ReplyScanner::Result ConsumeReplies(Sink& sink, size_t count, size_t* replies) {
  while (*replies < count) {
    const ReplyScanner::Result next = sink.Next(*replies);
    if (next != ReplyScanner::Result::kReply && next != ReplyScanner::Result::kError) return next;
    ++*replies;
  }
  return ReplyScanner::Result::kIncomplete;
}

}  // namespace

// The exchange under every command: sends data and calls sink.Next(reply_index)
// (which consumes the reply, or says it is incomplete) until `count` replies
// were consumed. Sending and receiving interleave (the socket is non-blocking;
// waits are in poll), so replies are consumed while the request is still going
// out. The transport says what each call waits for: TLS may have to read to
// write, or the other way round. On failure the connection is unusable
// (reconnect); what(i) names the command of reply i in messages, and
// `tell_replies` adds "(n of count replies received)" to a timeout's.
template <typename What, typename Sink>
Status RedisConnection::Exchange(const char* data, size_t len, size_t count, What what, Sink& sink,
                                 bool tell_replies) {
  Transport& transport = *impl_->transport;
  const int fd = impl_->ctx->fd;
  const SteadyClock::time_point start = SteadyClock::now();
  size_t replies = 0;
  auto fail = [&](RedisErrorKind kind, const std::string& why) {
    last_error_ = kind;
    sink.Reset();
    return Unavailable("redis " + address() + ": " + what(replies) + ": " + why);
  };
  const size_t read_chunk = sink.ChunkSize();
  const int timeout_ms =
      static_cast<int>(std::min<int64_t>(options_.command_timeout_ms, INT32_MAX));
  size_t written = 0;
  short write_wait = POLLOUT;  // what the unfinished write waits for
  short read_wait = POLLIN;    // what the next read waits for
  bool readable = false;       // the last read filled its chunk, or TLS holds more: read again
  // The first send goes out without a poll: an idle connection's send buffer has
  // room (a full one makes it wait, and the loop polls then).
  bool send_first = len > 0;
  while (written < len || replies < count) {
    pollfd pfd{fd, static_cast<short>(read_wait | (written < len ? write_wait : 0)), 0};
    if (send_first) {
      send_first = false;
      pfd.revents = POLLOUT;
    } else if (readable) {
      pfd.revents = read_wait;
    } else {
      const Wait w = PollFor(&pfd, timeout_ms);
      if (w == Wait::kAgain) continue;
      if (w == Wait::kError)
        return fail(RedisErrorKind::kIo, std::string("poll: ") + std::strerror(errno));
      if (w == Wait::kTimeout) {
        // (The timeout runs from the last data received or sent, not from start.)
        std::string why =
            NoAnswer(options_.command_timeout_name, options_.command_timeout_ms, start);
        if (tell_replies)
          why += " (" + std::to_string(replies) + " of " + std::to_string(count) +
                 " replies received)";
        return fail(RedisErrorKind::kTimeout, why);
      }
    }
    readable = false;
    if (written < len && (pfd.revents & (write_wait | POLLERR | POLLNVAL)) &&
        !WriteSome(transport, data, len, &written, &write_wait))
      return fail(RedisErrorKind::kIo, transport.error());
    if (!(pfd.revents & (read_wait | POLLHUP | POLLERR | POLLNVAL))) continue;
    size_t n = 0;
    const Transport::Io io =
        ReadSome(transport, sink.Prepare(read_chunk), read_chunk, &read_wait, &n);
    if (io == Transport::Io::kClosed || io == Transport::Io::kError)
      return fail(RedisErrorKind::kIo, transport.error());
    if (io != Transport::Io::kOk) continue;
    sink.Commit(n);
    readable = n == read_chunk || transport.Pending();
    if (ConsumeReplies(sink, count, &replies) == ReplyScanner::Result::kProtocolError) {
      last_error_ = RedisErrorKind::kProtocol;
      sink.Reset();
      return Internal("redis " + address() + ": " + what(replies) + ": protocol error in reply " +
                      std::to_string(replies));
    }
  }
  if (sink.Buffered() != 0) {
    last_error_ = RedisErrorKind::kProtocol;
    sink.Reset();
    return Internal("redis " + address() + ": " + what(replies) + ": more replies than commands");
  }
  return Status::Ok();
}

Status RedisConnection::Pipeline(const char* data, size_t len, size_t count,
                                 std::vector<ReplyError>* errors,
                                 std::vector<ReplyScanner::Ints>* ints) {
  ReplyScanner& scanner = impl_->scanner;
  if (ints) ints->resize(count);
  ReplyScanner::Ints* const reply_ints = ints ? ints->data() : nullptr;
  auto next = [&](size_t i) {
    std::string_view text;
    ReplyScanner::Result r = scanner.Next(&text, reply_ints ? reply_ints + i : nullptr);
    if (r == ReplyScanner::Result::kError && errors)
      errors->push_back({i, ClassifyErrorReply(text), std::string(text)});
    return r;
  };
  ScannerSink<decltype(next)> sink{scanner, next};
  return Exchange(
      data, len, count, [](size_t) { return std::string("pipeline"); }, sink, true);
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
  auto next = [&](size_t i) {
    std::string_view text;
    ReplyScanner::Result r = scanner.Next(&text, nullptr, &arrays[i]);
    if (r == ReplyScanner::Result::kError) (*replies)[i].error.assign(text.empty() ? "ERR" : text);
    return r;
  };
  ScannerSink<decltype(next)> sink{scanner, next};
  Status st = Exchange(
      data, len, count, [](size_t) { return std::string("MGET"); }, sink, true);
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
