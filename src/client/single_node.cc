// Client::Impl (client/impl.h) on one Redis: the connection pool, connect and
// prepare, one retry on a connection the server closed while idle, MGET, PING.
#include <algorithm>

#include "client/impl.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;
using ef::StatusCode;

namespace {

// Standalone MGETs: kept per thread and reused from call to call; the values are
// views into `received` (RedisConnection::ReadArrays: no copies).
struct ThreadBuffers {
  std::string request;
  std::string received;
  std::vector<ef::RedisConnection::ArrayReply> replies;

  // Beyond these, a buffer is given back after the call: one huge batch must
  // not pin its memory in every thread that ever served one.
  static constexpr size_t kKeepBytes = 4 << 20;
  static constexpr size_t kKeepReplies = 4096;
  void Trim() {
    if (request.capacity() > kKeepBytes) std::string().swap(request);
    if (received.capacity() > kKeepBytes) std::string().swap(received);
    if (replies.capacity() > kKeepReplies) {
      std::vector<ef::RedisConnection::ArrayReply>().swap(replies);
    } else {
      for (auto& r : replies)
        if (r.values.capacity() > kKeepReplies) std::vector<std::string_view>().swap(r.values);
    }
  }
};
thread_local ThreadBuffers thread_buffers;

}  // namespace

void client_internal::TrimThreadBuffers() { thread_buffers.Trim(); }

Status Client::Impl::Connect(Clock::time_point deadline, ef::client::ConnectionPool::Conn* out) {
  ef::RedisOptions o = redis;
  o.connect_timeout_ms = std::max<int64_t>(1, Millis(deadline - Clock::now()));
  // The handshake (AUTH, SELECT, PING) and the meta read are part of the call.
  o.command_timeout_ms = o.connect_timeout_ms;
  o.connect_timeout_name = o.command_timeout_name = kLeftOfDeadline;
  auto conn = ef::RedisConnection::Connect(o);
  if (!conn.ok()) return conn.status();
  if (connected_once.exchange(true)) Add(counters.reconnects, 1);
  bool found = false;
  Status st = RefreshLayout(**conn, &found);
  if (!st.ok()) return st;
  *out = std::move(*conn);
  return Status::Ok();
}

Status Client::Impl::Prepare(ef::client::PooledConnection& pc, Clock::time_point start,
                             Clock::time_point deadline, bool* reused) {
  if (!pc.Acquire(deadline))
    return DeadlineError(start, deadline, "waiting for a free Redis connection");
  *reused = pc.conn() != nullptr;
  if (*reused && LayoutRecheckDue() != Recheck::kNo) {
    bool found = false;
    Add(counters.layout_reads, 1);
    Status st = RefreshLayout(*pc.conn(), &found);
    if (!st.ok()) {
      LayoutRecheckFailed();  // the next call's connection retries it soon
      const bool dead = DeadBeforeUse(*pc.conn(), deadline);
      pc.Drop();
      if (!dead) return st;
      Add(counters.stale_retries, 1);  // connect anew below (which reads the meta)
      *reused = false;
    }
  }
  if (!pc.conn()) {
    Status st = Connect(deadline, &pc.conn());
    if (!st.ok()) return st;
  }
  if (Clock::now() > deadline) return DeadlineError(start, deadline, "connecting to Redis");
  return Status::Ok();
}

bool Client::Impl::DeadBeforeUse(const ef::RedisConnection& conn, Clock::time_point deadline) {
  return conn.last_error_kind() == ef::RedisErrorKind::kIo && Clock::now() < deadline;
}

template <typename Exchange>
Status Client::Impl::ExchangeOnce(ef::client::PooledConnection& pc, bool reused,
                                  Clock::time_point deadline, Exchange exchange) {
  for (;;) {
    pc.conn()->SetCommandTimeout(std::max<int64_t>(1, Millis(deadline - Clock::now())),
                                 kLeftOfDeadline);
    Status st = exchange(*pc.conn());
    if (st.ok()) return st;
    const bool retry = reused && DeadBeforeUse(*pc.conn(), deadline);
    pc.Drop();  // broken: the next call connects again and re-reads the meta
    if (!retry) return st;
    Add(counters.stale_retries, 1);
    reused = false;
    EF_RETURN_IF_ERROR(Connect(deadline, &pc.conn()));
  }
}

Status Client::Impl::SingleMget(const std::vector<std::vector<std::string>>& commands,
                                Clock::time_point start, Clock::time_point deadline,
                                std::vector<ef::RedisConnection::ArrayReply>** replies_out) {
  ef::client::PooledConnection pc(pool);
  std::string& request = thread_buffers.request;
  std::string& received = thread_buffers.received;
  std::vector<ef::RedisConnection::ArrayReply>& replies = thread_buffers.replies;
  *replies_out = &replies;
  bool reused = false;
  Status st = Prepare(pc, start, deadline, &reused);
  if (!st.ok()) return st;
  request.clear();
  for (const std::vector<std::string>& args : commands) {
    ef::AppendRespArrayHeader(args.size(), &request);
    for (const std::string& a : args) ef::AppendRespBulk(a, &request);
  }
  st = ExchangeOnce(pc, reused, deadline, [&](ef::RedisConnection& conn) {
    return conn.ReadArrays(request.data(), request.size(), commands.size(), &received, &replies);
  });
  if (!st.ok()) return st;
  for (size_t v = 0; v < replies.size() && st.ok(); ++v) {
    const ef::RedisConnection::ArrayReply& reply = replies[v];
    if (!reply.error.empty()) {
      st = MgetReplyError("redis " + pc.conn()->address(), reply.error);
      if (ef::RedisConnection::CallsForReconnect(reply.error)) pc.Drop();
    } else if (!reply.bulks || reply.values.size() != commands[v].size() - 1) {
      st = ef::Internal("redis " + pc.conn()->address() + ": MGET: unexpected reply");
      pc.Drop();
    }
  }
  if (st.ok() && Clock::now() > deadline) st = DeadlineError(start, deadline, "waiting for Redis");
  return st;
}

// Commands pipelined on a pooled connection (made, or re-made once, within the
// deadline). Error replies are left to the caller (one that calls for a
// reconnect drops the connection here).
Status Client::Impl::SingleCommands(const std::vector<std::vector<std::string>>& commands,
                                    Clock::time_point start, Clock::time_point deadline,
                                    std::vector<ef::RedisReply>* replies) {
  ef::client::PooledConnection pc(pool);
  bool reused = false;
  Status st = Prepare(pc, start, deadline, &reused);
  if (!st.ok()) return st;
  // A failed exchange drops the connection (or a new one failed): st says why.
  st = ExchangeOnce(pc, reused, deadline,
                    [&](ef::RedisConnection& conn) { return conn.Commands(commands, replies); });
  if (!st.ok()) return st;
  for (const ef::RedisReply& reply : *replies) {
    if (reply.type == ef::RedisReply::Type::kError &&
        ef::RedisConnection::CallsForReconnect(reply.str)) {
      pc.Drop();
      break;
    }
  }
  if (Clock::now() > deadline) return DeadlineError(start, deadline, "waiting for Redis");
  return Status::Ok();
}

// PING on a pooled connection (made, or re-made once, within the deadline).
Status Client::Impl::PingSingle(Clock::time_point start, Clock::time_point deadline) {
  std::vector<ef::RedisReply> replies;
  Status st = SingleCommands({{"PING"}}, start, deadline, &replies);
  if (st.ok() && replies.front().type == ef::RedisReply::Type::kError)
    st = ef::Unavailable("redis " + redis.addresses.front() + ": PING: " + replies.front().str);
  return st;
}

}  // namespace exposure_filter
