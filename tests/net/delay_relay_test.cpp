// The delaying relay: the delay it adds is at least the configured one, the rate cap holds,
// end of stream passes through, and the ring transport works across it.
#include "hearth/net/delay_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/net/transport.h"

namespace hearth::net {
namespace {

using namespace std::chrono_literals;

int listening_socket(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 8) != 0) {
    throw IoError(errno_message("test listener"));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw IoError(errno_message("test connect"));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool read_exact(int fd, void* buf, size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Echoes everything back on each accepted connection until the client closes.
class EchoServer {
 public:
  EchoServer() : fd_(listening_socket(port_)) {
    thread_ = std::thread([this] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      const int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      char buf[65536];
      for (;;) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        if (::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      ::close(c);
    });
  }
  ~EchoServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0;
  int fd_;
  std::thread thread_;
};

double round_trip_ms(int fd) {
  const char ping = 'p';
  char pong = 0;
  const double t0 = now_ms();
  EXPECT_EQ(::send(fd, &ping, 1, MSG_NOSIGNAL), 1);
  EXPECT_TRUE(read_exact(fd, &pong, 1));
  EXPECT_EQ(pong, 'p');
  return now_ms() - t0;
}

TEST(DelayRelay, AddsAtLeastTheConfiguredDelayEachWay) {
  EchoServer echo;
  RelayOptions o;
  o.target_port = echo.port();
  o.delay_ms = 25;
  DelayRelay relay(o);
  const int fd = connect_to(relay.port());
  double best = 1e9;
  for (int i = 0; i < 5; ++i) best = std::min(best, round_trip_ms(fd));
  // Request and reply are each held 25 ms: the fastest round trip is at least 50 ms.
  EXPECT_GE(best, 2 * o.delay_ms);
  EXPECT_LT(best, 2 * o.delay_ms + 500) << "relay adds far more than the configured delay";
  std::printf("relay delay 25 ms each way: best RTT %.2f ms over 5 pings\n", best);
  ::close(fd);
  relay.stop();  // joins the forwarding threads, so the counters are final
  EXPECT_EQ(relay.stats().connections, 1u);
  EXPECT_EQ(relay.stats().bytes_forwarded, 10u);
}

TEST(DelayRelay, CapsTheRate) {
  EchoServer echo;
  RelayOptions o;
  o.target_port = echo.port();
  o.rate_bytes_per_s = 2e6;  // 2 MB/s each way
  o.burst_bytes = 16 * 1024;
  DelayRelay relay(o);
  const int fd = connect_to(relay.port());
  constexpr size_t kBytes = 300 * 1024;
  std::vector<uint8_t> out(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = static_cast<uint8_t>(i * 31);
  std::vector<uint8_t> in(kBytes);
  const double t0 = now_ms();
  std::thread writer([&] { ::send(fd, out.data(), out.size(), MSG_NOSIGNAL); });
  ASSERT_TRUE(read_exact(fd, in.data(), in.size()));
  const double ms = now_ms() - t0;
  writer.join();
  EXPECT_EQ(in, out);
  // Each direction may send one burst at once, then the rest at the rate; the echo pipelines
  // the two directions, so the whole takes at least (bytes - burst) / rate.
  const double floor_ms = (kBytes - o.burst_bytes) / o.rate_bytes_per_s * 1e3;
  EXPECT_GE(ms, floor_ms);
  std::printf("relay 2 MB/s cap: %zu bytes echoed in %.1f ms (floor %.1f ms)\n", kBytes, ms,
              floor_ms);
  ::close(fd);
}

TEST(DelayRelay, PassesEndOfStreamThrough) {
  uint16_t port = 0;
  const int server = listening_socket(port);
  RelayOptions o;
  o.target_port = port;
  o.delay_ms = 5;
  DelayRelay relay(o);
  const int fd = connect_to(relay.port());
  const int peer = ::accept(server, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  ASSERT_EQ(::send(fd, "abc", 3, MSG_NOSIGNAL), 3);
  ::shutdown(fd, SHUT_WR);
  char buf[8] = {};
  ASSERT_TRUE(read_exact(peer, buf, 3));
  EXPECT_EQ(std::string(buf, 3), "abc");
  EXPECT_EQ(::recv(peer, buf, sizeof buf, 0), 0) << "the half-close must reach the target";
  // The other direction still works after the half-close.
  ASSERT_EQ(::send(peer, "xy", 2, MSG_NOSIGNAL), 2);
  ASSERT_TRUE(read_exact(fd, buf, 2));
  EXPECT_EQ(std::string(buf, 2), "xy");
  ::close(peer);
  ::close(fd);
  ::close(server);
}

TEST(DelayRelay, RingTransportWorksThroughTheRelay) {
  auto server = listen("tcp://127.0.0.1:0");
  const std::string ep = server->endpoint();
  RelayOptions o;
  o.target_port = static_cast<uint16_t>(std::stoi(ep.substr(ep.rfind(':') + 1)));
  o.delay_ms = 15;
  DelayRelay relay(o);
  auto client = connect(relay.endpoint());
  client->send(Ping{1, 0});
  const Incoming in = server->recv(5s, "Ping");
  // Time one Ping/Pong now that the link is up (the first includes the ZMTP handshake).
  server->send(in.from, Pong{1, 0});
  client->recv(5s, "Pong");
  const double t0 = now_ms();
  client->send(Ping{2, 0});
  const Incoming in2 = server->recv(5s, "Ping");
  server->send(in2.from, Pong{2, 0});
  EXPECT_EQ(std::get<Pong>(client->recv(5s, "Pong").body).nonce, 2u);
  EXPECT_GE(now_ms() - t0, 2 * o.delay_ms);
}

TEST(DelayRelay, BadOptionsAndStop) {
  RelayOptions o;
  EXPECT_THROW(DelayRelay{o}, UsageError);  // no target port
  o.target_port = 1;
  o.delay_ms = -1;
  EXPECT_THROW(DelayRelay{o}, UsageError);
  o.delay_ms = 0;
  o.target_host = "no-such-host.invalid";
  EXPECT_THROW(DelayRelay{o}, IoError);
  o.target_host = "127.0.0.1";
  DelayRelay relay(o);
  relay.stop();
  relay.stop();  // idempotent
}

}  // namespace
}  // namespace hearth::net
