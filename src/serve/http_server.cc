#include "serve/http_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ef::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How often the sweeper looks for overdue requests and idle connections: the
// precision of the 408 and the keep-alive timeout.
constexpr std::chrono::milliseconds kSweepEvery{50};
// How long a worker waits in epoll_wait before it looks at the queue and at
// Stop again (a request queued while it started waiting is picked up by then).
constexpr int kWaitMs = 50;
// A connection idle this long gives its input buffer back.
constexpr std::chrono::seconds kReleaseIdleAfter{1};
// The listening socket's accept queue.
constexpr int kListenBacklog = 4096;
// epoll data of the queue's eventfd and of the listening socket (connections
// are numbered from 1).
constexpr uint64_t kQueueEvent = 0;
constexpr uint64_t kListenEvent = ~uint64_t{0};

// Whether the request line at the front of `buffered` is a GET or HEAD of one
// of `paths` (with or without a query).
bool IsControl(std::string_view buffered, const std::vector<std::string>& paths) {
  std::string_view rest;
  if (buffered.substr(0, 4) == "GET ") {
    rest = buffered.substr(4);
  } else if (buffered.substr(0, 5) == "HEAD ") {
    rest = buffered.substr(5);
  } else {
    return false;
  }
  for (const std::string& p : paths) {
    if (rest.substr(0, p.size()) != p || rest.size() == p.size()) continue;
    if (rest[p.size()] == ' ' || rest[p.size()] == '?') return true;
  }
  return false;
}

}  // namespace

// The connection table and the threads that wait on its epoll set (the states
// and their invariants: http_server.h).
struct HttpServer::Loop {
  struct Connection {
    Connection(uint64_t id, int fd, std::chrono::microseconds read_timeout,
               std::chrono::microseconds write_timeout, size_t max_requests)
        : id(id), stream(fd, read_timeout, write_timeout), requests_left(max_requests) {}
    const uint64_t id;  // epoll data: an event for a connection already closed finds no entry
    ConnectionStream stream;
    enum class State { kWaiting, kRunning } state = State::kWaiting;
    // kWaiting: since it went idle, or its buffered request's first byte.
    Clock::time_point since = Clock::now();
    size_t requests_left;  // the keep-alive max count, counted down
    bool ended = false;    // the peer's end of stream came with bytes buffered
  };

  HttpServer& server;
  int listen_fd = -1;  // the server's (HttpServer owns it), non-blocking here
  int epoll_fd = -1;
  int queue_fd = -1;  // an eventfd in the epoll set (edge-triggered): a request was queued
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};  // table size, for OpenConnections
  mutable std::mutex mu;        // everything below, and every Connection's state and since
  std::condition_variable sweep_cv;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> table;
  uint64_t next_id = 1;
  // Whole requests the control thread read and left to the request workers.
  std::deque<Connection*> queue;

  explicit Loop(HttpServer& s) : server(s) {}
  ~Loop() {
    if (epoll_fd >= 0) close(epoll_fd);
    if (queue_fd >= 0) close(queue_fd);
  }

  bool Start(int workers, int listening) {
    listen_fd = listening;
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    queue_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd < 0 || queue_fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = kQueueEvent;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, queue_fd, &ev) != 0) return false;
    // The listening socket (level-triggered): whichever thread epoll wakes
    // accepts, so a new connection's first request costs no other thread's turn.
    const int flags = fcntl(listen_fd, F_GETFL);
    if (flags < 0 || fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
    ev.events = EPOLLIN;
    ev.data.u64 = kListenEvent;
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listen_fd, &ev) != 0) return false;
    // The control thread first: it should be the longest waiter (epoll wakes
    // the last one), so that it is woken only while every worker is busy.
    threads.emplace_back([this] { Wait(true); });
    for (int i = 0; i < workers; ++i) threads.emplace_back([this] { Wait(false); });
    threads.emplace_back([this] { Sweep(); });
    return true;
  }

  // Arms `c` (kWaiting) for its next readable event. Under mu.
  bool Arm(Connection* c, int op) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = c->id;
    return epoll_ctl(epoll_fd, op, c->stream.socket(), &ev) == 0;
  }

  // Ends `c` and frees it. Under mu, by its holder.
  void Close(Connection* c) {
    const int fd = c->stream.socket();
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    shutdown(fd, SHUT_RDWR);
    close(fd);
    table.erase(c->id);
    open.store(table.size(), std::memory_order_relaxed);
  }

  // Accepts every connection waiting (the thread epoll woke for the listening
  // socket). At the open files limit (EMFILE), waits a millisecond: the
  // connection stays in the accept queue until a descriptor is free.
  void AcceptAll() {
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        Add(fd);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return;  // EAGAIN: none left
    }
  }

  void Add(int fd) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) {
      shutdown(fd, SHUT_RDWR);
      close(fd);
      return;
    }
    auto c = std::make_unique<Connection>(next_id++, fd,
                                          std::chrono::seconds(server.read_timeout_sec_) +
                                              std::chrono::microseconds(server.read_timeout_usec_),
                                          std::chrono::seconds(server.write_timeout_sec_) +
                                              std::chrono::microseconds(server.write_timeout_usec_),
                                          std::max<size_t>(1, server.keep_alive_max_count_));
    Connection* raw = c.get();
    table.emplace(raw->id, std::move(c));
    open.store(table.size(), std::memory_order_relaxed);
    if (!Arm(raw, EPOLL_CTL_ADD)) Close(raw);
  }

  // The connection an event was for, now kRunning and this thread's; null if
  // it was closed or taken (by the sweeper) meanwhile.
  Connection* Take(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = table.find(id);
    if (it == table.end() || it->second->state != Connection::State::kWaiting) return nullptr;
    it->second->state = Connection::State::kRunning;
    return it->second.get();
  }

  // Gives `c` back to epoll (reusable) or closes it.
  void Finish(Connection* c, bool keep) {
    std::lock_guard<std::mutex> lock(mu);
    if (!keep || stopping) return Close(c);
    c->state = Connection::State::kWaiting;
    if (!Arm(c, EPOLL_CTL_MOD)) Close(c);
  }

  // Answers the requests buffered on `c` (whole: Pending() said so).
  void Serve(Connection* c) {
    // After the peer's end of stream, what came is answered and the connection ends.
    const bool keep =
        server.ServeRequests(c->stream, c->since, &c->requests_left, stopping.load() || c->ended) &&
        !c->ended;
    // ServeRequests answered every whole request: at most part of one is left.
    // The buffer stays for the next request (the sweeper frees it once idle).
    c->since = Clock::now();
    Finish(c, keep);
  }

  // `c` is readable (or its peer hung up): reads what is there, then serves a
  // whole request (the control thread: only a control one; it queues the
  // others for the request workers) or waits for more.
  void OnReadable(Connection* c, bool control_thread) {
    const bool had_bytes = !c->stream.Buffered().empty();
    switch (c->stream.ReceiveNow()) {
      case ConnectionStream::Receive::kAgain:
        return Finish(c, true);
      case ConnectionStream::Receive::kError:
        return Finish(c, false);
      case ConnectionStream::Receive::kEnd:
        // With part of a request buffered, httplib answers what came (400).
        if (!had_bytes) return Finish(c, false);
        c->ended = true;
        return Serve(c);
      case ConnectionStream::Receive::kData:
        break;
    }
    if (!had_bytes) c->since = Clock::now();  // the request's first byte
    if (c->stream.Pending(server.payload_max_length_) != ConnectionStream::Request::kReady)
      return Finish(c, true);
    if (control_thread && !IsControl(c->stream.Buffered(), server.control_paths_)) {
      {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(c);
      }
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t n = ::write(queue_fd, &one, sizeof one);
      return;
    }
    Serve(c);
  }

  Connection* PopQueued() {
    std::lock_guard<std::mutex> lock(mu);
    if (queue.empty()) return nullptr;
    Connection* c = queue.front();
    queue.pop_front();
    return c;
  }

  bool Done() {
    std::lock_guard<std::mutex> lock(mu);
    return stopping && table.empty();
  }

  // A request worker (serve.threads of them) or the control thread. All wait on
  // the same epoll set, and epoll wakes the waiter that waited last (LIFO):
  // the control thread, which waits the longest, is woken only while every
  // request worker is busy. Then it answers the control requests itself, so
  // that health checks never wait behind requests, and queues the others.
  void Wait(bool control_thread) {
    for (;;) {
      if (!control_thread) {
        if (Connection* c = PopQueued()) {
          Serve(c);
          continue;
        }
      }
      if (stopping && Done()) return;
      epoll_event ev;
      const int n = epoll_wait(epoll_fd, &ev, 1, kWaitMs);
      if (n == 1 && ev.data.u64 == kListenEvent) {
        if (!stopping) AcceptAll();
        continue;
      }
      if (n <= 0 || ev.data.u64 == kQueueEvent) {
        // The eventfd's edge woke this thread; a request worker takes the
        // queue's head on its next turn (the count is never read: edge-triggered).
        continue;
      }
      Connection* c = Take(ev.data.u64);
      if (c == nullptr) continue;
      // Requests queued earlier go first: a request the control thread queued
      // is not overtaken by one that arrived after it.
      if (!control_thread)
        while (Connection* q = PopQueued()) Serve(q);
      OnReadable(c, control_thread);
    }
  }

  // The sweeper: ends idle connections past the keep-alive timeout (all of them
  // once stopping) and answers requests overdue (408), every kSweepEvery.
  void Sweep() {
    const auto idle = std::chrono::seconds(server.keep_alive_timeout_sec_);
    const auto request = std::chrono::seconds(server.read_timeout_sec_) +
                         std::chrono::microseconds(server.read_timeout_usec_);
    for (;;) {
      std::vector<Connection*> overdue;
      {
        std::unique_lock<std::mutex> lock(mu);
        sweep_cv.wait_for(lock, kSweepEvery);
        if (stopping && table.empty()) return;
        const Clock::time_point now = Clock::now();
        std::vector<Connection*> idle_out;
        for (auto& [id, owned] : table) {
          Connection* c = owned.get();
          if (c->state != Connection::State::kWaiting) continue;
          if (c->stream.Buffered().empty()) {
            if (stopping || now - c->since >= idle) idle_out.push_back(c);
            // Idle a while: its input buffer goes (kept between a busy
            // client's requests: a malloc and free of 64 KiB each cost more).
            if (now - c->since >= kReleaseIdleAfter) c->stream.ReleaseIdleBuffer();
          } else if (now - c->since >= request) {
            overdue.push_back(c);
          }
        }
        for (Connection* c : idle_out) Close(c);
        for (Connection* c : overdue) {
          c->state = Connection::State::kRunning;  // an event already taken finds it so
          epoll_event none{};
          none.events = EPOLLONESHOT;  // a hang-up is still reported, once
          none.data.u64 = c->id;
          epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->stream.socket(), &none);  // disarmed
        }
      }
      for (Connection* c : overdue) Serve(c);  // 408 from its deadline
    }
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
      epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);  // no more accepts
    }
    sweep_cv.notify_all();
    for (std::thread& t : threads) t.join();
    threads.clear();
  }
};

HttpServer::HttpServer() {
  httplib::Server::set_error_handler(
      HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        ConnectionStream* current = ConnectionStream::Current();
        if (current != nullptr && !current->Reusable()) {
          // httplib answers 400 to a body that stopped coming: it was its deadline.
          if (res.status == 400 && current->TimedOut()) res.status = 408;
          // Ended after this answer (httplib still adds its Keep-Alive header).
          if (!res.has_header("Connection")) res.set_header("Connection", "close");
        }
        return error_handler_fn_ ? error_handler_fn_(req, res) : HandlerResponse::Unhandled;
      }));
}

HttpServer::~HttpServer() { StopListening(); }

HttpServer& HttpServer::set_error_handler(HandlerWithResponse handler) {
  error_handler_fn_ = std::move(handler);
  return *this;
}

HttpServer& HttpServer::set_logger(httplib::Logger logger) {
  logger_fn_ = logger;
  httplib::Server::set_logger(std::move(logger));
  return *this;
}

HttpServer& HttpServer::set_worker_threads(int n) {
  worker_threads_ = std::max(1, n);
  return *this;
}

HttpServer& HttpServer::set_control_paths(std::vector<std::string> paths) {
  control_paths_ = std::move(paths);
  return *this;
}

size_t HttpServer::OpenConnections() const {
  return loop_ ? loop_->open.load(std::memory_order_relaxed) : 0;
}

void HttpServer::Refuse(ConnectionStream& strm, int status) {
  httplib::Request req;  // not parsed: method and path empty
  if (status == 413) {
    // The head is whole: its request line names the method and path (for the
    // logger's endpoint).
    const std::string_view head = strm.Buffered();
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const size_t sp = line.find(' ');
    if (sp != std::string_view::npos) {
      const std::string_view target = line.substr(sp + 1, line.find(' ', sp + 1) - sp - 1);
      req.method = std::string(line.substr(0, sp));
      req.path = std::string(target.substr(0, target.find('?')));
    }
  }
  strm.get_remote_ip_and_port(req.remote_addr, req.remote_port);
  strm.get_local_ip_and_port(req.local_addr, req.local_port);
  httplib::Response res;
  res.version = "HTTP/1.1";
  res.status = status;
  if (error_handler_fn_) error_handler_fn_(req, res);
  res.status = status;
  if (!res.has_header("Connection")) res.set_header("Connection", "close");
  if (!res.body.empty() && !res.has_header("Content-Type"))
    res.set_header("Content-Type", "text/plain");
  if (!res.has_header("Content-Length"))
    res.set_header("Content-Length", std::to_string(res.body.size()));
  const char* reason = status == 408   ? "Request Timeout"
                       : status == 413 ? "Payload Too Large"
                                       : "Request Header Fields Too Large";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n";
  for (const auto& [name, value] : res.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  out += res.body;
  strm.write(out.data(), out.size());
  if (logger_fn_) logger_fn_(req, res);
}

void HttpServer::ListenInBackground() {
  if (loop_ || svr_sock_ == INVALID_SOCKET) return;
  // httplib 0.11 listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG): a pool
  // opening hundreds of connections at once saw most of them time out. listen()
  // again on the bound socket sets the backlog (capped by net.core.somaxconn).
  ::listen(svr_sock_, kListenBacklog);
  loop_ = std::make_unique<Loop>(*this);
  if (!loop_->Start(worker_threads_, svr_sock_)) loop_.reset();
}

void HttpServer::StopListening() {
  if (!loop_) return;
  loop_->Stop();
  loop_.reset();
  const int sock = svr_sock_.exchange(INVALID_SOCKET);
  if (sock != INVALID_SOCKET) {
    shutdown(sock, SHUT_RDWR);
    close(sock);
  }
}

bool HttpServer::ServeRequests(ConnectionStream& strm, Clock::time_point start,
                               size_t* requests_left, bool last) {
  const ConnectionStream::Serving serving(&strm);
  bool keep = true;
  for (;;) {
    const ConnectionStream::Head head = strm.BeginRequest(start, payload_max_length_);
    if (head == ConnectionStream::Head::kTooLarge || head == ConnectionStream::Head::kTimeout ||
        head == ConnectionStream::Head::kBodyTooLarge) {
      Refuse(strm, head == ConnectionStream::Head::kTimeout        ? 408
                   : head == ConnectionStream::Head::kBodyTooLarge ? 413
                                                                   : 431);
      keep = false;
      break;
    }
    // After an end of stream, httplib parses what came (400 if it is not whole).
    if (head == ConnectionStream::Head::kError) {
      keep = false;
      break;
    }
    // As httplib's own loop: the last of keep_alive_max_count_ requests is
    // answered with "Connection: close"; none after a broken request.
    const bool final_request = last || *requests_left <= 1;
    bool connection_closed = false;
    const bool ok = process_request(strm, final_request, connection_closed, nullptr);
    --*requests_left;
    strm.EndRequest();
    if (!ok || connection_closed || final_request || !strm.Reusable()) {
      keep = false;
      break;
    }
    // A next request already whole (pipelined) is answered now, on this worker.
    if (strm.Pending(payload_max_length_) != ConnectionStream::Request::kReady) break;
    start = Clock::now();
  }
  if (!strm.Flush()) keep = false;  // the last response
  return keep;
}

}  // namespace ef::serve
