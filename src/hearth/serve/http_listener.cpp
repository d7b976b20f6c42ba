#include "hearth/serve/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "hearth/base/error.h"
#include "hearth/base/log.h"

namespace hearth::serve {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 16 << 10;
// After an error answer the rest of the request is read and dropped for a while before the
// socket closes: closing with unread bytes would reset the connection and lose the answer.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = 1 << 20;
constexpr auto kProbeInterval = std::chrono::milliseconds(200);

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Sends what the socket takes now; for small answers written by the reading thread.
void send_now(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t w = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data.remove_prefix(static_cast<size_t>(w));
  }
}

// Sends all of `data`, waiting for room up to `deadline`; false when the peer is gone or slow.
bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t w = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      data.remove_prefix(static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) {
        return false;
      }
      continue;
    }
    return false;
  }
  return true;
}

std::string head_lines(int status, std::string_view content_type, const HttpHeaders& headers) {
  std::string h = fmt::format("HTTP/1.1 {} {}\r\n", status, http_reason(status));
  if (!content_type.empty()) h += fmt::format("Content-Type: {}\r\n", content_type);
  for (const auto& [k, v] : headers) h += fmt::format("{}: {}\r\n", k, v);
  return h;
}

std::string default_error_body(int, const std::string& message) {
  std::string out = "{\"error\": \"";
  for (char c : message) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"}";
}

}  // namespace

struct Conn {
  int fd = -1;
  std::string addr;
  int port = 0;
  RequestParser parser;
  std::string pending;           // read, not yet given to the parser
  Clock::time_point since;       // when this connection began waiting for its request
  Clock::time_point deadline;    // idle or request deadline
  bool request_started = false;  // a byte of the current request has arrived
  size_t lingered = 0;           // bytes dropped after an error answer

  explicit Conn(const HttpLimits& limits) : parser(limits) {}
};
using ConnPtr = std::unique_ptr<Conn>;

struct HttpListener::Impl {
  ListenerOptions opt;
  HttpHandler handler;
  int listen_fd = -1;
  int wake_read = -1, wake_write = -1;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};

  // The reading thread's own.
  std::vector<ConnPtr> reading;
  std::vector<ConnPtr> lingering;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<ConnPtr, HttpRequest>> jobs;  // complete requests for handler threads
  std::vector<ConnPtr> returned;                     // kept-alive connections back to reading
  bool workers_stop = false;
  std::vector<std::thread> workers;

  Impl(ListenerOptions o, HttpHandler h) : opt(std::move(o)), handler(std::move(h)) {
    if (!opt.error_body) opt.error_body = default_error_body;
    int p[2];
    if (::pipe(p) != 0) throw Error(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    wake_read = p[0];
    wake_write = p[1];
    set_nonblocking(wake_read);
    set_nonblocking(wake_write);
  }

  ~Impl() {
    for (int fd : {listen_fd, wake_read, wake_write}) {
      if (fd >= 0) ::close(fd);
    }
  }

  void wake() {
    const char b = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_write, &b, 1);
  }

  void close_conn(ConnPtr& c) {
    if (c && c->fd >= 0) {
      ::close(c->fd);
      c->fd = -1;
      open.fetch_sub(1);
    }
    c.reset();
  }

  // An answer from the reading thread (malformed, too large, too slow, too busy); then the
  // connection lingers to read out what the client still sends, and closes.
  void refuse(ConnPtr c, int status, const std::string& message) {
    const std::string body = opt.error_body(status, message);
    HttpHeaders h{{"Content-Length", std::to_string(body.size())}, {"Connection", "close"}};
    send_now(c->fd, head_lines(status, "application/json", h) + "\r\n" + body);
    ::shutdown(c->fd, SHUT_WR);
    c->deadline = Clock::now() + kLingerTime;
    lingering.push_back(std::move(c));
  }

  void dispatch(ConnPtr c) {
    HttpRequest req = c->parser.take();
    c->parser.reset();
    {
      std::lock_guard lock(mu);
      // Requests waiting beyond one per thread would wait long: say so now instead.
      if (jobs.size() < opt.threads) {
        jobs.emplace_back(std::move(c), std::move(req));
        cv.notify_one();
        return;
      }
    }
    refuse(std::move(c), 503, "the server is too busy; try again later");
  }

  // Feeds what the connection has read to its parser. False when the connection left the
  // reading set (dispatched to a handler, refused or closed).
  bool advance(ConnPtr& c) {
    while (true) {
      size_t used = 0;
      const auto st = c->parser.feed(c->pending, &used);
      c->pending.erase(0, used);
      if (c->parser.started() && !c->request_started) {
        c->request_started = true;
        c->deadline = Clock::now() + std::chrono::seconds(opt.request_timeout_s);
      }
      switch (st) {
        case RequestParser::State::kNeedMore:
          return true;
        case RequestParser::State::kHeadersDone:
          if (c->parser.expects_continue()) send_now(c->fd, "HTTP/1.1 100 Continue\r\n\r\n");
          continue;
        case RequestParser::State::kDone:
          dispatch(std::move(c));
          return false;
        case RequestParser::State::kError: {
          const int status = c->parser.error_status();
          const std::string message = c->parser.error_message();
          refuse(std::move(c), status, message);
          return false;
        }
      }
    }
  }

  // Reads what has arrived; false when the connection left the reading set.
  bool read_some(ConnPtr& c) {
    char buf[kReadChunk];
    for (int round = 0; round < 4; ++round) {
      const ssize_t r = ::recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (r <= 0) {  // closed, or reset: a request not complete by now never will be
        close_conn(c);
        return false;
      }
      c->pending.append(buf, static_cast<size_t>(r));
      if (!advance(c)) return false;
    }
    return true;
  }

  void accept_all() {
    while (true) {
      sockaddr_storage sa{};
      socklen_t len = sizeof sa;
      const int fd = ::accept(listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          log::warn("serve: accept failed: {}", std::strerror(errno));
        }
        return;
      }
      set_nonblocking(fd);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Conn>(opt.limits);
      c->fd = fd;
      char host[INET6_ADDRSTRLEN] = "";
      if (sa.ss_family == AF_INET) {
        const auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
        ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        c->port = ntohs(a->sin_port);
      } else if (sa.ss_family == AF_INET6) {
        const auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
        ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        c->port = ntohs(a->sin6_port);
      }
      c->addr = host;
      c->since = Clock::now();
      c->deadline = c->since + std::chrono::seconds(opt.request_timeout_s);
      open.fetch_add(1);
      if (open.load() > opt.max_connections && !make_room()) {
        refuse(std::move(c), 503, "too many connections are open; try again later");
        continue;
      }
      reading.push_back(std::move(c));
    }
  }

  // The table is full: the connection that has waited longest for its request goes (a
  // trickling client loses its place to one that sends at once). Lingering ones go first.
  bool make_room() {
    if (!lingering.empty()) {
      close_conn(lingering.front());
      lingering.erase(lingering.begin());
      return true;
    }
    auto oldest =
        std::min_element(reading.begin(), reading.end(),
                         [](const auto& a, const auto& b) { return a->since < b->since; });
    if (oldest == reading.end()) return false;
    close_conn(*oldest);
    reading.erase(oldest);
    return true;
  }

  void take_returned() {
    std::vector<ConnPtr> back;
    {
      std::lock_guard lock(mu);
      back.swap(returned);
    }
    const auto now = Clock::now();
    for (auto& c : back) {
      c->since = now;
      c->request_started = false;
      c->deadline = now + std::chrono::seconds(opt.keep_alive_timeout_s);
      // A pipelined next request may already be here.
      if (!c->pending.empty() && !advance(c)) continue;
      reading.push_back(std::move(c));
    }
  }

  void expire(Clock::time_point now) {
    for (auto& c : reading) {
      if (now < c->deadline) continue;
      if (c->request_started) {
        refuse(std::move(c), 408,
               fmt::format("the request did not arrive within {} s", opt.request_timeout_s));
      } else {
        close_conn(c);
      }
    }
    std::erase(reading, nullptr);
    for (auto& c : lingering) {
      if (now >= c->deadline) close_conn(c);
    }
    std::erase(lingering, nullptr);
  }

  void drain_lingering(ConnPtr& c) {
    char buf[kReadChunk];
    while (true) {
      const ssize_t r = ::recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (r <= 0 || (c->lingered += static_cast<size_t>(r)) > kLingerBytes) {
        close_conn(c);
        return;
      }
    }
  }

  void loop() {
    std::vector<pollfd> fds;
    while (!stopping.load()) {
      fds.clear();
      fds.push_back({listen_fd, POLLIN, 0});
      fds.push_back({wake_read, POLLIN, 0});
      size_t buffered = 0;
      for (const auto& c : reading) buffered += c->parser.buffered_bytes();
      const bool full = buffered >= opt.max_buffered_bytes;
      for (const auto& c : reading) {
        fds.push_back({c->fd, static_cast<short>(full && c->parser.in_body() ? 0 : POLLIN), 0});
      }
      for (const auto& c : lingering) fds.push_back({c->fd, POLLIN, 0});
      auto next = Clock::now() + std::chrono::seconds(1);
      for (const auto& c : reading) next = std::min(next, c->deadline);
      for (const auto& c : lingering) next = std::min(next, c->deadline);
      const auto wait =
          std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      const int n =
          ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait, 0) + 1));
      if (n < 0 && errno != EINTR) {
        log::warn("serve: poll failed: {}", std::strerror(errno));
        break;
      }
      if (stopping.load()) break;
      const size_t n_reading = reading.size(), n_lingering = lingering.size();
      for (size_t i = 0; i < n_reading; ++i) {
        if (fds[2 + i].revents != 0 && reading[i] && !read_some(reading[i])) reading[i] = nullptr;
      }
      for (size_t i = 0; i < n_lingering; ++i) {
        if (fds[2 + n_reading + i].revents != 0 && lingering[i]) drain_lingering(lingering[i]);
      }
      std::erase(reading, nullptr);
      std::erase(lingering, nullptr);
      if (fds[1].revents != 0) {
        char b[256];
        while (::read(wake_read, b, sizeof b) > 0) {
        }
        take_returned();
      }
      if (fds[0].revents != 0) accept_all();
      expire(Clock::now());
    }
  }

  void work();  // a handler thread
};

namespace {

class Exchange final : public HttpExchange {
 public:
  Exchange(Conn& c, const HttpRequest& req, int write_timeout_s, const std::atomic<bool>& stopping)
      : c_(c), req_(req), write_timeout_(write_timeout_s), stopping_(stopping) {}

  const HttpRequest& request() const override { return req_; }
  const std::string& remote_addr() const override { return c_.addr; }
  bool responded() const override { return responded_; }
  // Whether the connection can carry the client's next request.
  bool reusable() const {
    return !broken_ && !eof_ && req_.keep_alive && !stopping_.load() && (!streaming_ || chunked_);
  }

  void respond(int status, std::string_view content_type, std::string_view body,
               const HttpHeaders& headers) override {
    if (responded_) return;
    responded_ = true;
    HttpHeaders h = headers;
    h.emplace_back("Content-Length", std::to_string(body.size()));
    h.emplace_back("Connection", keep_alive_now() ? "keep-alive" : "close");
    std::string out = head_lines(status, content_type, h) + "\r\n";
    if (req_.method != "HEAD") out.append(body);
    send(out);
  }

  bool begin_stream(int status, std::string_view content_type, const HttpHeaders& headers,
                    std::string probe) override {
    if (responded_) return false;
    responded_ = true;
    streaming_ = true;
    chunked_ = req_.version_minor >= 1;
    probe_ = std::move(probe);
    HttpHeaders h = headers;
    if (chunked_) h.emplace_back("Transfer-Encoding", "chunked");
    h.emplace_back("Connection", chunked_ && keep_alive_now() ? "keep-alive" : "close");
    return send(head_lines(status, content_type, h) + "\r\n");
  }

  bool write(std::string_view data) override {
    if (!streaming_ || broken_) return false;
    if (data.empty()) return true;
    if (!chunked_) return send(data);
    std::string out = fmt::format("{:x}\r\n", data.size());
    out.append(data);
    out += "\r\n";
    return send(out);
  }

  void end_stream() override {
    if (!streaming_ || ended_) return;
    ended_ = true;
    if (chunked_ && !broken_) send("0\r\n\r\n");
  }

  // After the handler: a stream it did not end cannot carry another request (the client sees
  // the connection close in the middle of the chunked body, which is how HTTP says "cut").
  void finish() {
    if (streaming_ && !ended_) broken_ = true;
  }

  bool client_gone() override {
    if (broken_) return true;
#ifdef POLLRDHUP
    pollfd p{c_.fd, POLLIN | POLLRDHUP, 0};
#else
    pollfd p{c_.fd, POLLIN, 0};
#endif
    if (::poll(&p, 1, 0) > 0) {
      if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) {
        broken_ = true;
        return true;
      }
      if (!eof_) {
        char b;
        const ssize_t r = ::recv(c_.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r == 0) {
          eof_ = true;
        } else if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          broken_ = true;
          return true;
        }
      }
    }
    if (!eof_) return false;
    // The client sent FIN: closed, or only half-closed and still reading. HTTP/1.0 has no
    // interim answers to ask with.
    if (req_.version_minor == 0) {
      broken_ = true;
      return true;
    }
    const auto now = Clock::now();
    if (now - last_probe_ < kProbeInterval) return false;
    last_probe_ = now;
    bool ok;
    if (!responded_) {
      ok = send("HTTP/1.1 100 Continue\r\n\r\n");
    } else if (streaming_ && !probe_.empty()) {
      ok = write(probe_);
    } else {
      ok = false;
    }
    if (!ok) broken_ = true;
    return broken_;
  }

 private:
  bool keep_alive_now() const {
    return !broken_ && !eof_ && req_.keep_alive && !stopping_.load();
  }

  bool send(std::string_view data) {
    if (broken_) return false;
    if (!send_all(c_.fd, data, Clock::now() + std::chrono::seconds(write_timeout_))) {
      broken_ = true;
    }
    return !broken_;
  }

  Conn& c_;
  const HttpRequest& req_;
  const int write_timeout_;
  const std::atomic<bool>& stopping_;
  bool responded_ = false, streaming_ = false, chunked_ = false, ended_ = false;
  bool broken_ = false, eof_ = false;
  std::string probe_;
  Clock::time_point last_probe_{};
};

}  // namespace

void HttpListener::Impl::work() {
  while (true) {
    std::pair<ConnPtr, HttpRequest> job;
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return workers_stop || !jobs.empty(); });
      if (jobs.empty()) return;
      job = std::move(jobs.front());
      jobs.pop_front();
    }
    ConnPtr& c = job.first;
    Exchange ex(*c, job.second, opt.write_timeout_s, stopping);
    try {
      handler(ex);
    } catch (const std::exception& e) {
      log::warn("serve: {} {}: {}", job.second.method, job.second.path, e.what());
    }
    if (!ex.responded()) {
      ex.respond(500, "application/json", opt.error_body(500, "the request was not answered"), {});
    }
    ex.finish();
    if (ex.reusable()) {
      std::lock_guard lock(mu);
      if (!workers_stop) {
        returned.push_back(std::move(c));
        wake();
        continue;
      }
    }
    close_conn(c);
  }
}

HttpListener::HttpListener(ListenerOptions options, HttpHandler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}

HttpListener::~HttpListener() {
  stop();
}

int HttpListener::bind() {
  auto& im = *impl_;
  // Each open connection is a descriptor: make the soft limit as large as allowed.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(im.opt.port);
  const std::string where = fmt::format("{}:{}", im.opt.host, im.opt.port);
  if (::getaddrinfo(im.opt.host.c_str(), port.c_str(), &hints, &res) != 0 || !res) {
    throw UsageError(fmt::format("cannot listen on {}: the host is not a local address", where));
  }
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      im.listen_fd = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (im.listen_fd < 0) throw UsageError(fmt::format("cannot listen on {}: {}", where, why));
  set_nonblocking(im.listen_fd);
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getsockname(im.listen_fd, reinterpret_cast<sockaddr*>(&sa), &len);
  return sa.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

void HttpListener::run() {
  auto& im = *impl_;
  if (im.listen_fd < 0) throw Error("HttpListener::run before bind");
  for (size_t i = 0; i < std::max<size_t>(im.opt.threads, 1); ++i) {
    im.workers.emplace_back([&im] { im.work(); });
  }
  im.loop();
  {
    std::lock_guard lock(im.mu);
    im.workers_stop = true;
    for (auto& job : im.jobs) im.close_conn(job.first);
    im.jobs.clear();
  }
  im.cv.notify_all();
  for (auto& t : im.workers) t.join();
  im.workers.clear();
  for (auto& c : im.reading) im.close_conn(c);
  for (auto& c : im.lingering) im.close_conn(c);
  for (auto& c : im.returned) im.close_conn(c);
  im.reading.clear();
  im.lingering.clear();
  im.returned.clear();
}

void HttpListener::stop() {
  impl_->stopping.store(true);
  impl_->wake();
}

size_t HttpListener::connections() const {
  return impl_->open.load();
}

}  // namespace hearth::serve
