#include "hearth/net/delay_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netfilter_ipv4.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/base/log.h"

namespace hearth::net {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 20;  // how often blocked threads look at the stop flag
constexpr size_t kReadChunk = 64 * 1024;

sockaddr_in resolve(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    throw IoError(fmt::format("relay: cannot resolve '{}': {}", host, gai_strerror(rc)));
  }
  sockaddr_in addr{};
  std::memcpy(&addr, res->ai_addr, sizeof addr);
  freeaddrinfo(res);
  addr.sin_port = htons(port);
  return addr;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw IoError(errno_message("relay: fcntl O_NONBLOCK"));
  }
}

// Shared rate limit of one direction. take() blocks until n bytes may leave.
class TokenBucket {
 public:
  TokenBucket(double rate, size_t burst)
      : rate_(rate), burst_(static_cast<double>(burst)), tokens_(burst_), last_(Clock::now()) {}

  // Returns false if `stop` became true while waiting.
  bool take(size_t n, const std::atomic<bool>& stop) {
    if (rate_ <= 0) return true;
    const double want = std::min(static_cast<double>(n), burst_);
    std::unique_lock lock(mu_);
    for (;;) {
      const auto now = Clock::now();
      tokens_ =
          std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
      last_ = now;
      if (tokens_ >= want) {
        tokens_ -= want;
        return true;
      }
      if (stop) return false;
      const double wait_s = std::min((want - tokens_) / rate_, kPollMs / 1e3);
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
      lock.lock();
    }
  }
  size_t max_take() const { return rate_ <= 0 ? kReadChunk : static_cast<size_t>(burst_); }

 private:
  std::mutex mu_;
  double rate_;
  double burst_;
  double tokens_;
  Clock::time_point last_;
};

struct Chunk {
  Clock::time_point due;
  std::vector<uint8_t> data;  // (n) bytes; empty = end of stream
};

// One direction of one relayed connection: a reader thread stamps chunks, a writer thread
// releases them when due and when the bucket allows.
class Pipe {
 public:
  Pipe(int src, int dst, const RelayOptions& opts, TokenBucket& bucket,
       std::atomic<uint64_t>& forwarded, const std::atomic<bool>& stop)
      : src_(src), dst_(dst), opts_(opts), bucket_(bucket), forwarded_(forwarded), stop_(stop) {
    reader_ = std::thread([this] { read_loop(); });
    writer_ = std::thread([this] { write_loop(); });
  }
  ~Pipe() { join(); }
  void join() {
    {
      std::lock_guard lock(mu_);
      broken_ = true;
    }
    cv_.notify_all();
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
  }
  bool finished() const { return finished_; }

 private:
  bool should_stop() {
    std::lock_guard lock(mu_);
    return stop_ || broken_;
  }

  void read_loop() {
    std::vector<uint8_t> buf(kReadChunk);
    for (;;) {
      {
        std::unique_lock lock(mu_);
        // Back-pressure: stop reading while too much is held.
        cv_.wait_for(lock, std::chrono::milliseconds(kPollMs),
                     [&] { return buffered_ < opts_.max_buffered_bytes || broken_ || stop_; });
        if (broken_ || stop_) return;
        if (buffered_ >= opts_.max_buffered_bytes) continue;
      }
      pollfd p{src_, POLLIN, 0};
      const int rc = ::poll(&p, 1, kPollMs);
      if (rc == 0 || (rc < 0 && errno == EINTR)) continue;
      const ssize_t n = rc < 0 ? -1 : ::recv(src_, buf.data(), buf.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      Chunk c{Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double, std::milli>(opts_.delay_ms)),
              {}};
      if (n > 0) c.data.assign(buf.begin(), buf.begin() + n);
      {
        std::lock_guard lock(mu_);
        buffered_ += c.data.size();
        queue_.push_back(std::move(c));
      }
      cv_.notify_all();
      if (n <= 0) return;  // end of stream or error: the writer passes it on
    }
  }

  void write_loop() {
    for (;;) {
      Chunk c;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(kPollMs),
                     [&] { return !queue_.empty() || broken_ || stop_; });
        if (broken_ || stop_) break;
        if (queue_.empty()) continue;
        // Hold the chunk until it is due; wake early only to stop.
        if (cv_.wait_until(lock, queue_.front().due, [&] { return broken_ || stop_.load(); })) {
          break;
        }
        c = std::move(queue_.front());
        queue_.pop_front();
        buffered_ -= c.data.size();
      }
      cv_.notify_all();
      if (c.data.empty()) {
        ::shutdown(dst_, SHUT_WR);  // pass the end of stream on, keep the other way open
        break;
      }
      if (!write_all(c.data)) break;
    }
    finished_ = true;
  }

  bool write_all(const std::vector<uint8_t>& data) {
    size_t done = 0;
    while (done < data.size()) {
      const size_t n = std::min(data.size() - done, bucket_.max_take());
      if (!bucket_.take(n, stop_)) return false;
      size_t sent = 0;
      while (sent < n) {
        if (should_stop()) return false;
        const ssize_t w = ::send(dst_, data.data() + done + sent, n - sent, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
          pollfd p{dst_, POLLOUT, 0};
          ::poll(&p, 1, kPollMs);
          continue;
        }
        if (w < 0) {
          // The receiver went away: stop this connection in both directions.
          ::shutdown(src_, SHUT_RDWR);
          return false;
        }
        sent += static_cast<size_t>(w);
      }
      forwarded_ += n;
      done += n;
    }
    return true;
  }

  int src_;
  int dst_;
  const RelayOptions& opts_;
  TokenBucket& bucket_;
  std::atomic<uint64_t>& forwarded_;
  const std::atomic<bool>& stop_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> queue_;
  size_t buffered_ = 0;
  bool broken_ = false;
  std::atomic<bool> finished_{false};
  std::thread reader_;
  std::thread writer_;
};

struct Link {
  int client = -1;
  int target = -1;
  std::unique_ptr<Pipe> up;    // client -> target
  std::unique_ptr<Pipe> down;  // target -> client
  ~Link() {
    up.reset();
    down.reset();
    if (client >= 0) ::close(client);
    if (target >= 0) ::close(target);
  }
};

}  // namespace

struct DelayRelay::Impl {
  RelayOptions opts;
  int listen_fd = -1;
  uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> forwarded{0};
  TokenBucket up_bucket;
  TokenBucket down_bucket;
  std::list<std::unique_ptr<Link>> links;  // touched only by the accept thread and stop()
  std::thread acceptor;

  explicit Impl(RelayOptions o)
      : opts(std::move(o)),
        up_bucket(opts.rate_bytes_per_s, opts.burst_bytes),
        down_bucket(opts.rate_bytes_per_s, opts.burst_bytes) {}

  void accept_loop() {
    const sockaddr_in fixed_target =
        opts.transparent ? sockaddr_in{} : resolve(opts.target_host, opts.target_port);
    while (!stop) {
      // Reap connections whose both directions ended.
      links.remove_if(
          [](const std::unique_ptr<Link>& l) { return l->up->finished() && l->down->finished(); });
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, kPollMs) <= 0) continue;
      const int client = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      sockaddr_in target = fixed_target;
      if (opts.transparent) {
        // The redirect rule rewrote the destination; the kernel keeps the original one.
        socklen_t len = sizeof target;
        if (::getsockopt(client, SOL_IP, SO_ORIGINAL_DST, &target, &len) != 0) {
          log::warn("relay :{}: connection without an original destination: {}", port,
                    std::strerror(errno));
          ::close(client);
          continue;
        }
      }
      const int t = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (t >= 0 && opts.mark != 0) {
        ::setsockopt(t, SOL_SOCKET, SO_MARK, &opts.mark, sizeof opts.mark);
      }
      if (t < 0 || ::connect(t, reinterpret_cast<const sockaddr*>(&target), sizeof target) != 0) {
        char host[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, &target.sin_addr, host, sizeof host);
        log::warn("relay :{}: cannot reach target {}:{}: {}", port, host, ntohs(target.sin_port),
                  std::strerror(errno));
        if (t >= 0) ::close(t);
        ::close(client);
        continue;
      }
      const int one = 1;
      // The relay's own buffering must not add Nagle delay on top of the configured one.
      ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ::setsockopt(t, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      set_nonblocking(client);
      set_nonblocking(t);
      auto link = std::make_unique<Link>();
      link->client = client;
      link->target = t;
      link->up = std::make_unique<Pipe>(client, t, opts, up_bucket, forwarded, stop);
      link->down = std::make_unique<Pipe>(t, client, opts, down_bucket, forwarded, stop);
      links.push_back(std::move(link));
      ++connections;
    }
    links.clear();
  }
};

DelayRelay::DelayRelay(RelayOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {
  const RelayOptions& o = impl_->opts;
  if (o.delay_ms < 0 || o.rate_bytes_per_s < 0 || o.burst_bytes == 0 ||
      (!o.transparent && o.target_port == 0)) {
    throw UsageError(fmt::format(
        "relay: needs delay_ms >= 0 ({}), rate >= 0 ({}), burst > 0 ({}), a target port ({})",
        o.delay_ms, o.rate_bytes_per_s, o.burst_bytes, o.target_port));
  }
  const sockaddr_in addr = resolve(o.listen_host, o.listen_port);
  if (!o.transparent) resolve(o.target_host, o.target_port);  // fail now, not in the thread
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(errno_message("relay: socket"));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 64) != 0) {
    const std::string msg =
        errno_message(fmt::format("relay: cannot listen on {}:{}", o.listen_host, o.listen_port));
    ::close(fd);
    throw IoError(msg);
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  impl_->listen_fd = fd;
  impl_->port = ntohs(bound.sin_port);
  impl_->acceptor = std::thread([this] {
    try {
      impl_->accept_loop();
    } catch (const std::exception& e) {
      log::error("relay :{} stopped: {}", impl_->port, e.what());
    }
  });
}

DelayRelay::~DelayRelay() {
  stop();
}

void DelayRelay::stop() {
  impl_->stop = true;
  if (impl_->acceptor.joinable()) impl_->acceptor.join();
  if (impl_->listen_fd >= 0) {
    ::close(impl_->listen_fd);
    impl_->listen_fd = -1;
  }
}

uint16_t DelayRelay::port() const {
  return impl_->port;
}

std::string DelayRelay::endpoint() const {
  return fmt::format("tcp://{}:{}", impl_->opts.listen_host, impl_->port);
}

RelayStats DelayRelay::stats() const {
  return RelayStats{impl_->connections.load(), impl_->forwarded.load()};
}

}  // namespace hearth::net
