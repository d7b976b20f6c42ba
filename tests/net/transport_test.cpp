// Transport behaviour on real sockets (tcp on 127.0.0.1, free ports) and on the in-process
// loopback, which must behave the same: round trips, garbage from one peer while another is
// served, bounded receive timeouts, dead peers noticed, a ring of inboxes.
#include "hearth/net/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "net/sample_messages.h"

namespace hearth::net {
namespace {

using namespace std::chrono_literals;

std::atomic<int> g_loop_seq{0};

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  bool tcp() const { return GetParam() == "tcp"; }
  // A fresh address: a free tcp port, or a unique loopback name.
  std::string address() const {
    return tcp() ? "tcp://127.0.0.1:0" : "loop://t" + std::to_string(g_loop_seq++);
  }
  static TransportOptions quick() {
    TransportOptions o;
    o.send_timeout_ms = 1000;
    o.linger_ms = 0;
    return o;
  }
};

TEST_P(TransportTest, RequestAndReplyCarryTheMessage) {
  auto server = listen(address(), quick());
  auto client = connect(server->endpoint(), quick());
  Hello hello;
  hello.device_name = "head";
  hello.model = {10, 20};
  client->send(hello, 41);
  const Incoming in = server->recv(3s, "Hello");
  EXPECT_EQ(in.msg.header.request_id, 41u);
  ASSERT_TRUE(std::holds_alternative<Hello>(in.msg.body));
  EXPECT_EQ(std::get<Hello>(in.msg.body).device_name, "head");
  HelloAck ack;
  ack.device_name = "worker";
  server->send(in.from, ack, 41);
  const Envelope back = client->recv(3s, "HelloAck");
  EXPECT_EQ(std::get<HelloAck>(back.body).device_name, "worker");
  // A large data-plane message (4 MiB of hidden state) arrives intact.
  const Activations big = testing::sample_activations(256, 4096);
  client->send(big, 7);
  const Incoming got = server->recv(5s, "Activations");
  EXPECT_TRUE(std::get<Activations>(got.msg.body) == big);
  EXPECT_EQ(server->dropped(), 0u);
}

TEST_P(TransportTest, GarbageFromOnePeerIsDroppedAndTheOtherIsServed) {
  auto server = listen(address(), quick());
  auto bad = connect(server->endpoint(), quick());
  auto good = connect(server->endpoint(), quick());
  // Make sure both links are up before the garbage flies (tcp connects asynchronously).
  good->send(Ping{1, 0});
  bad->send(Ping{2, 0});
  for (int i = 0; i < 2; ++i) server->recv(3s, "warm-up Ping");

  std::mt19937 rng(7);
  std::vector<std::vector<uint8_t>> garbage;
  garbage.push_back({});                    // empty
  garbage.push_back({'H', 'R', 'T', 'H'});  // truncated header
  auto wrong_version = encode(Ping{3, 0});
  wrong_version[4] = 9;
  garbage.push_back(wrong_version);
  auto corrupt = encode(testing::sample_activations(4, 8));
  corrupt.back() ^= 1;  // bad checksum
  garbage.push_back(corrupt);
  auto lying = encode(Ping{4, 0});
  lying[16] = 200;  // declares more than sent
  garbage.push_back(lying);
  std::vector<uint8_t> noise(5000);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  garbage.push_back(noise);
  for (const auto& g : garbage) bad->send_raw(g);

  good->send(Ping{99, 5}, 99);
  const Incoming in = server->recv(3s, "Ping from the good peer");
  EXPECT_EQ(std::get<Ping>(in.msg.body).nonce, 99u);
  server->send(in.from, Pong{99, 5}, 99);
  EXPECT_EQ(std::get<Pong>(good->recv(3s, "Pong").body).nonce, 99u);
  // Peers are served fairly, so some garbage may still be queued behind the good Ping: none
  // of it may come out as a message.
  EXPECT_FALSE(server->recv_for(300ms).has_value());
  EXPECT_EQ(server->dropped(), garbage.size()) << "every garbage message counted as dropped";
  // The bad peer is not banned from sending valid messages later.
  bad->send(Ping{100, 0});
  EXPECT_EQ(std::get<Ping>(server->recv(3s, "Ping").msg.body).nonce, 100u);
}

TEST_P(TransportTest, OversizedMessagesAreRefusedAndTheListenerKeepsServing) {
  TransportOptions small = quick();
  small.max_message_bytes = 4096;
  auto server = listen(address(), small);
  auto bad = connect(server->endpoint(), quick());
  auto good = connect(server->endpoint(), quick());
  bad->send(testing::sample_activations(64, 64));  // 16 KiB + header > 4 KiB limit
  good->send(Ping{5, 0});
  const Incoming in = server->recv(3s, "Ping");
  EXPECT_EQ(std::get<Ping>(in.msg.body).nonce, 5u);
  // Nothing but the Ping ever arrives: tcp closes the oversized sender's link, loop drops.
  EXPECT_FALSE(server->recv_for(300ms).has_value());
  if (tcp()) {
    EXPECT_GE(server->links_closed(), 1u) << "the refused link is counted (and logged)";
  } else {
    EXPECT_EQ(server->dropped(), 1u);
  }
}

TEST_P(TransportTest, ReceiveTimeoutsAreBoundedAndNameThePeer) {
  auto server = listen(address(), quick());
  auto client = connect(server->endpoint(), quick());
  const double t0 = now_ms();
  try {
    client->recv(250ms, "Ready");
    FAIL() << "recv returned without a message";
  } catch (const NetError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(server->endpoint()), std::string::npos) << msg;
    EXPECT_NE(msg.find("Ready"), std::string::npos) << msg;
  }
  const double waited = now_ms() - t0;
  EXPECT_GE(waited, 240.0);
  EXPECT_LT(waited, 2000.0);
  const double t1 = now_ms();
  EXPECT_THROW(server->recv(150ms, "Hello"), NetError);
  EXPECT_GE(now_ms() - t1, 140.0);
  EXPECT_FALSE(server->recv_for(0ms).has_value());
}

TEST_P(TransportTest, DeadPeerIsNoticedBeforeTheTimeout) {
  auto server = listen(address(), quick());
  auto client = connect(server->endpoint(), quick());
  client->send(Ping{1, 0});
  const Incoming in = server->recv(3s, "Ping");
  server->send(in.from, Pong{1, 0});
  client->recv(3s, "Pong");  // link established both ways
  EXPECT_FALSE(client->peer_lost());
  server.reset();  // the worker process "dies"
  const double t0 = now_ms();
  try {
    client->recv(10s, "Activations");
    FAIL() << "recv returned";
  } catch (const NetError& e) {
    EXPECT_NE(std::string(e.what()).find("connection lost"), std::string::npos) << e.what();
  }
  EXPECT_LT(now_ms() - t0, 3000.0) << "loss must be noticed well before the 10 s timeout";
  EXPECT_TRUE(client->peer_lost());
  EXPECT_THROW(client->send(Ping{2, 0}), NetError);
}

TEST_P(TransportTest, SendToNobodyFailsWithinTheSendTimeout) {
  std::string nobody;
  int holder = -1;
  if (tcp()) {
    // A port held by a socket that is bound but never listens: connections are refused, and
    // nobody else can take the port during the test.
    holder = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(holder, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(holder, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    nobody = "tcp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  } else {
    nobody = "loop://nobody-listens-here";
  }
  TransportOptions o = quick();
  o.send_timeout_ms = 300;
  auto client = connect(nobody, o);
  const double t0 = now_ms();
  EXPECT_THROW(client->send(Ping{1, 0}), NetError);
  EXPECT_LT(now_ms() - t0, 2000.0);
  if (holder >= 0) ::close(holder);
}

TEST_P(TransportTest, WaitAnyReportsTheReadyReceiver) {
  auto a = listen(address(), quick());
  auto b = listen(address(), quick());
  auto to_b = connect(b->endpoint(), quick());
  std::vector<Receiver*> rs = {a.get(), b.get()};
  EXPECT_EQ(wait_any(rs, 100ms), rs.size());  // nothing yet: timeout
  to_b->send(Ping{3, 0});
  EXPECT_EQ(wait_any(rs, 3s), 1u);
  EXPECT_EQ(std::get<Ping>(b->recv(1s, "Ping").msg.body).nonce, 3u);
}

// The data plane: each device's inbox listener receives from its predecessor, and the last
// device hands back to device 0, as in the ring of the paper.
TEST_P(TransportTest, ActivationsTravelARingOfInboxes) {
  constexpr int kDevices = 3;
  std::vector<std::unique_ptr<Listener>> inbox;
  for (int d = 0; d < kDevices; ++d) inbox.push_back(listen(address(), quick()));
  std::vector<std::unique_ptr<Connection>> to_next;
  for (int d = 0; d < kDevices; ++d) {
    to_next.push_back(connect(inbox[(d + 1) % kDevices]->endpoint(), quick()));
  }
  Activations a = testing::sample_activations(2, 16);
  const std::vector<float> start = a.hidden;
  to_next[0]->send(a, 1);
  // Devices 1 and 2 each "compute" (add their index) and pass on.
  for (int d = 1; d < kDevices; ++d) {
    Activations x = std::get<Activations>(inbox[d]->recv(3s, "Activations").msg.body);
    for (float& v : x.hidden) v += static_cast<float>(d);
    x.next_layer += 4;
    x.final = d == kDevices - 1;
    to_next[d]->send(x, 1);
  }
  const Incoming back = inbox[0]->recv(3s, "final Activations");
  const auto& out = std::get<Activations>(back.msg.body);
  EXPECT_TRUE(out.final);
  EXPECT_EQ(out.next_layer, a.next_layer + 8);
  ASSERT_EQ(out.hidden.size(), start.size());
  for (size_t i = 0; i < start.size(); ++i) EXPECT_EQ(out.hidden[i], start[i] + 3.0f);
}

INSTANTIATE_TEST_SUITE_P(Both, TransportTest, ::testing::Values("tcp", "loop"),
                         [](const auto& info) { return info.param; });

TEST(Transport, RejectsUnknownSchemes) {
  EXPECT_THROW(listen("udp://127.0.0.1:5"), UsageError);
  EXPECT_THROW(connect("127.0.0.1:5"), UsageError);
  EXPECT_THROW(listen("tcp://256.1.1.1:5"), NetError);
  auto l = listen("loop://dup");
  EXPECT_THROW(listen("loop://dup"), NetError);
}

// A raw TCP client that does not speak ZMTP at all (an HTTP probe, a port scanner) must not
// disturb the listener.
TEST(Transport, RawTcpNoiseDoesNotStopTheListener) {
  auto server = listen("tcp://127.0.0.1:0");
  const std::string ep = server->endpoint();
  const int port = std::stoi(ep.substr(ep.rfind(':') + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n" + std::string(3000, '\xff');
  ASSERT_GT(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
  auto good = connect(ep);
  good->send(Ping{8, 0});
  EXPECT_EQ(std::get<Ping>(server->recv(3s, "Ping").msg.body).nonce, 8u);
  // libzmq refuses the noise at the handshake; the listener counts and logs it.
  for (int i = 0; i < 50 && server->links_closed() == 0; ++i) server->recv_for(20ms);
  EXPECT_GE(server->links_closed(), 1u);
  EXPECT_EQ(server->dropped(), 0u) << "the noise never became a message";
  ::close(fd);
}

TEST(Transport, MixingTcpAndLoopInWaitAnyIsAUsageError) {
  auto a = listen("tcp://127.0.0.1:0");
  auto b = listen("loop://mix");
  std::vector<Receiver*> rs = {a.get(), b.get()};
  EXPECT_THROW(wait_any(rs, 10ms), UsageError);
}

}  // namespace
}  // namespace hearth::net
