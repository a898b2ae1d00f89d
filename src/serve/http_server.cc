#include "serve/http_server.h"

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

namespace ef::serve {
namespace {

using Clock = std::chrono::steady_clock;

// How often the loop looks for overdue requests and idle connections: the
// precision of the 408 and the keep-alive timeout.
constexpr std::chrono::milliseconds kSweepEvery{50};
// Workers for the control paths and refusals.
constexpr int kControlWorkers = 1;

// httplib's accept loop hands each accepted socket to its task queue: this one
// runs the task at once, on the accept thread (HttpServer's override only adds
// the socket to the event loop).
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// A fixed set of threads running `run` on each item queued, in order.
template <typename T>
class WorkerPool {
 public:
  void Start(int threads, std::function<void(T)> run) {
    run_ = std::move(run);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(item);
    }
    cv_.notify_one();
  }
  // Runs what is queued, then joins.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Work() {
    for (;;) {
      T item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = queue_.front();
        queue_.pop_front();
      }
      run_(item);
    }
  }

  std::function<void(T)> run_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> queue_;
  bool stopping_ = false;
};

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

// The event loop, the connection table and the workers (the states and their
// invariants: http_server.h).
struct HttpServer::Loop {
  struct Connection {
    Connection(int fd, std::chrono::microseconds read_timeout,
               std::chrono::microseconds write_timeout, size_t max_requests)
        : stream(fd, read_timeout, write_timeout), requests_left(max_requests) {}
    ConnectionStream stream;
    enum class State { kWaiting, kRunning } state = State::kWaiting;
    // kWaiting: since it went idle, or its buffered request's first byte.
    Clock::time_point since = Clock::now();
    size_t requests_left;  // the keep-alive max count, counted down
    bool ended = false;    // the peer's end of stream came with bytes buffered
  };

  HttpServer& server;
  int epoll_fd = -1;
  int wake_fd = -1;  // an eventfd: Stop and the last Close wake the loop
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};  // table size, for OpenConnections
  mutable std::mutex mu;        // the table and every Connection's state and since
  std::unordered_map<Connection*, std::unique_ptr<Connection>> table;
  WorkerPool<Connection*> requests, control;

  explicit Loop(HttpServer& s) : server(s) {}
  ~Loop() {
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
  }

  bool Start(int workers) {
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (epoll_fd < 0 || wake_fd < 0) return false;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) return false;
    requests.Start(workers, [this](Connection* c) { Serve(c); });
    control.Start(kControlWorkers, [this](Connection* c) { Serve(c); });
    thread = std::thread([this] { Run(); });
    return true;
  }

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  // Arms `c` for its next readable event. Under mu.
  bool Arm(Connection* c, int op) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.ptr = c;
    return epoll_ctl(epoll_fd, op, c->stream.socket(), &ev) == 0;
  }

  // Ends `c` and frees it. Under mu, by its holder.
  void Close(Connection* c) {
    const int fd = c->stream.socket();
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    shutdown(fd, SHUT_RDWR);
    close(fd);
    table.erase(c);
    open.store(table.size(), std::memory_order_relaxed);
    if (stopping && table.empty()) Wake();
  }

  // From the accept thread.
  void Add(int fd) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) {
      shutdown(fd, SHUT_RDWR);
      close(fd);
      return;
    }
    auto c = std::make_unique<Connection>(fd,
                                          std::chrono::seconds(server.read_timeout_sec_) +
                                              std::chrono::microseconds(server.read_timeout_usec_),
                                          std::chrono::seconds(server.write_timeout_sec_) +
                                              std::chrono::microseconds(server.write_timeout_usec_),
                                          std::max<size_t>(1, server.keep_alive_max_count_));
    Connection* raw = c.get();
    table.emplace(raw, std::move(c));
    open.store(table.size(), std::memory_order_relaxed);
    if (!Arm(raw, EPOLL_CTL_ADD)) Close(raw);
  }

  // Hands `c` (kWaiting, not armed) to a worker. Under mu.
  void Dispatch(Connection* c, bool to_control) {
    c->state = Connection::State::kRunning;
    (to_control ? control : requests).Push(c);
  }

  // The loop thread: `c` is readable (or its peer hung up).
  void OnEvent(Connection* c) {
    std::lock_guard<std::mutex> lock(mu);
    const bool had_bytes = !c->stream.Buffered().empty();
    switch (c->stream.ReceiveNow()) {
      case ConnectionStream::Receive::kAgain:
        if (!Arm(c, EPOLL_CTL_MOD)) Close(c);
        return;
      case ConnectionStream::Receive::kError:
        return Close(c);
      case ConnectionStream::Receive::kEnd:
        // With part of a request buffered, httplib answers what came (400).
        if (!had_bytes) return Close(c);
        c->ended = true;
        return Dispatch(c, false);
      case ConnectionStream::Receive::kData:
        break;
    }
    if (!had_bytes) c->since = Clock::now();  // the request's first byte
    if (c->stream.Pending(server.payload_max_length_) == ConnectionStream::Request::kReady)
      return Dispatch(c, IsControl(c->stream.Buffered(), server.control_paths_));
    if (!Arm(c, EPOLL_CTL_MOD)) Close(c);
  }

  // The loop thread: ends idle connections past the keep-alive timeout (all of
  // them when stopping) and hands overdue requests to the control worker (408).
  void Sweep() {
    const Clock::time_point now = Clock::now();
    const auto idle = std::chrono::seconds(server.keep_alive_timeout_sec_);
    const auto request = std::chrono::seconds(server.read_timeout_sec_) +
                         std::chrono::microseconds(server.read_timeout_usec_);
    std::lock_guard<std::mutex> lock(mu);
    std::vector<Connection*> idle_out, overdue;
    for (auto& [c, owned] : table) {
      if (c->state != Connection::State::kWaiting) continue;
      if (c->stream.Buffered().empty()) {
        if (stopping || now - c->since >= idle) idle_out.push_back(c);
      } else if (now - c->since >= request) {
        overdue.push_back(c);
      }
    }
    for (Connection* c : idle_out) Close(c);
    for (Connection* c : overdue) {
      // Disarmed first: its socket's events are the worker's now.
      epoll_event none{};
      none.data.ptr = c;
      epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->stream.socket(), &none);
      Dispatch(c, true);
    }
  }

  void Run() {
    epoll_event events[256];
    Clock::time_point next_sweep = Clock::now() + kSweepEvery;
    for (;;) {
      const int n = epoll_wait(epoll_fd, events, 256, static_cast<int>(kSweepEvery.count()));
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
          continue;
        }
        OnEvent(static_cast<Connection*>(events[i].data.ptr));
      }
      const Clock::time_point now = Clock::now();
      if (stopping || now >= next_sweep) {
        Sweep();
        next_sweep = now + kSweepEvery;
      }
      if (stopping) {
        std::lock_guard<std::mutex> lock(mu);
        if (table.empty()) return;
      }
    }
  }

  // A worker: answers the requests buffered on `c`, then gives it back to the
  // loop or closes it.
  void Serve(Connection* c) {
    Clock::time_point start;
    {
      std::lock_guard<std::mutex> lock(mu);
      start = c->since;
    }
    // After the peer's end of stream, what came is answered and the connection ends.
    const bool keep =
        server.ServeRequests(c->stream, start, &c->requests_left, stopping.load() || c->ended) &&
        !c->ended;
    std::lock_guard<std::mutex> lock(mu);
    if (!keep || stopping) return Close(c);
    // ServeRequests answered every whole request: at most part of one is left.
    c->stream.ReleaseIdleBuffer();
    c->state = Connection::State::kWaiting;
    c->since = Clock::now();
    if (!Arm(c, EPOLL_CTL_MOD)) Close(c);
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    Wake();
    if (thread.joinable()) thread.join();
    requests.Stop();
    control.Stop();
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
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " +
                    (status == 408 ? "Request Timeout" : "Request Header Fields Too Large") +
                    "\r\n";
  for (const auto& [name, value] : res.headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
  out += res.body;
  strm.write(out.data(), out.size());
  if (logger_fn_) logger_fn_(req, res);
}

void HttpServer::ListenInBackground() {
  loop_ = std::make_unique<Loop>(*this);
  if (!loop_->Start(worker_threads_)) {
    loop_.reset();
    return;
  }
  new_task_queue = [] { return new InlineQueue(); };
  listener_ = std::thread([this] {
    listen_after_bind();
    listen_returned_ = true;
  });
  while (!is_running() && !listen_returned_)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::StopListening() {
  if (!listener_.joinable()) return;
  stop();
  listener_.join();
  if (loop_) loop_->Stop();
}

bool HttpServer::process_and_close_socket(int sock) {
  if (!loop_) {
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return false;
  }
  loop_->Add(sock);
  return true;
}

bool HttpServer::ServeRequests(ConnectionStream& strm, Clock::time_point start,
                               size_t* requests_left, bool last) {
  const ConnectionStream::Serving serving(&strm);
  bool keep = true;
  for (;;) {
    const ConnectionStream::Head head = strm.BeginRequest(start);
    if (head == ConnectionStream::Head::kTooLarge || head == ConnectionStream::Head::kTimeout) {
      Refuse(strm, head == ConnectionStream::Head::kTimeout ? 408 : 431);
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
