// A worker as a stranger on its network would try it (issue 17): a real `hearth worker`
// process on 127.0.0.1, and this test speaking the wire protocol to it as peers that leave
// without reading, lie about their model, ask for more than the device has, flood it with
// sequences, send oversized frames, or send random well-formed messages in random order.
// After each, the worker must still be running and serve an honest session. The worker runs
// with the tests' cluster key, as by default, and these peers hold it too: a member of the
// ring that misbehaves (a stranger without the key cannot complete a handshake at all:
// Curve.* and Ring.KeyFileEncryptsTheRingAndShutsOutOtherKeys).
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/transport.h"
#include "support/cluster_key.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"
#include "support/worker_process.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;
constexpr uint32_t kLayers = 4, kDim = 128;

const std::string& model_path() {
  static const std::string path = [] {
    const auto dir =
        hearth::testing::scratch_dir() / ("hearth_hostile_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return hearth::testing::write_model(
        (dir / "m.gguf").string(),
        {static_cast<int>(kLayers), static_cast<int>(kDim), 2, 2, 256, 512, "q8_0", 5});
  }();
  return path;
}

net::ModelIdentity identity() {
  return model_identity(gguf::GgufFile::open(model_path()));
}

uint64_t rss_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  uint64_t kb = 0;
  while (in >> key) {
    if (key == "VmRSS:") {
      in >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

// A peer that takes the worker's session: Hello with the right model, announcing its own
// listener as the head inbox.
struct Owner {
  std::unique_ptr<net::Listener> inbox = net::listen("tcp://127.0.0.1:0", hearth::testing::keyed());
  std::unique_ptr<net::Connection> control;
  net::HelloAck ack;

  explicit Owner(const std::string& worker)
      : control(net::connect(worker, hearth::testing::keyed())) {
    net::Hello h;
    h.model = identity();
    h.device_name = "test-head";
    h.data_endpoint = inbox->endpoint();
    control->send(h);
    const auto env = control->recv(net::Millis{5000}, "HelloAck");
    if (const auto* r = std::get_if<net::Refuse>(&env.body))
      throw NetError("refused: " + r->reason);
    ack = std::get<net::HelloAck>(env.body);
  }
  // Whole model on the worker, output back to this owner's inbox.
  net::Assign assign(uint32_t n_seq_max = 1) const {
    net::Assign a;
    a.ring_position = 1;
    a.n_devices = 2;
    a.n_layers = kLayers;
    a.windows = {net::LayerRange{0, kLayers}};
    a.successor_endpoint = inbox->endpoint();
    a.n_ctx = 64;
    a.n_seq_max = n_seq_max;
    return a;
  }
  // The worker's answer to an Assign: Ready, or the ErrorMsg text.
  std::string send_assign(const net::Assign& a) {
    control->send(a);
    const auto env = control->recv(net::Millis{10000}, "Ready");
    if (const auto* e = std::get_if<net::ErrorMsg>(&env.body)) return e->text;
    return std::holds_alternative<net::Ready>(env.body) ? "Ready" : "other";
  }
};

net::Activations batch(uint32_t first_seq, uint32_t n_seqs) {
  net::Activations a;
  a.dim = kDim;
  for (uint32_t i = 0; i < n_seqs; ++i) a.segments.push_back(net::SeqSegment{first_seq + i, 0, 1});
  a.hidden.assign(static_cast<size_t>(n_seqs) * kDim, 0.01f);
  return a;
}

// The worker still answers a Ping and completes an honest session end to end.
// A worker may still be busy with a session a peer began (until links are authenticated,
// whoever says Hello first owns it): wait for that to end, within `patience`.
void expect_serves_honestly(const hearth::testing::WorkerProcess& w,
                            std::chrono::seconds patience = std::chrono::seconds(2)) {
  ASSERT_TRUE(w.alive()) << w.log();
  const auto deadline = std::chrono::steady_clock::now() + patience;
  std::unique_ptr<Owner> owner;
  while (!owner) {
    try {
      owner = std::make_unique<Owner>(w.address());
    } catch (const NetError& e) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << e.what() << w.log();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  Owner& o = *owner;
  ASSERT_EQ(o.send_assign(o.assign()), "Ready") << w.log();
  auto data = net::connect(o.ack.data_endpoint, hearth::testing::keyed());
  data->send(batch(0, 1), 42);
  const auto back = o.inbox->recv(net::Millis{10000}, "the hidden state");
  const auto& act = std::get<net::Activations>(back.msg.body);
  EXPECT_TRUE(act.final);
  EXPECT_EQ(back.msg.header.request_id, 42u);
  EXPECT_EQ(act.hidden.size(), kDim);
  o.control->send(net::Stop{"done"});
}

class HostilePeer : public ::testing::Test {
 protected:
  hearth::testing::WorkerProcess w{{"-m", model_path(), "--repack", "off"}};
};

// Pongs to peers that left: the worker is stopped while the Pings reach its socket and the
// senders close. Whether libzmq still hands over a Ping whose link has closed varies from run
// to run; when it does, the Pong goes to a peer that is gone (logged "could not send Pong").
TEST_F(HostilePeer, PingsFromPeersThatLeaveDoNotEndTheWorker) {
  ASSERT_FALSE(w.address().empty()) << w.log();
  std::vector<std::unique_ptr<net::Connection>> peers;
  for (int i = 0; i < 5; ++i) {
    peers.push_back(net::connect(w.address(), hearth::testing::keyed()));
    peers.back()->send(net::Ping{static_cast<uint64_t>(i), 0});
    ASSERT_TRUE(
        std::holds_alternative<net::Pong>(peers.back()->recv(net::Millis{5000}, "Pong").body));
  }
  w.signal(SIGSTOP);
  for (auto& p : peers) p->send(net::Ping{99, 0});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the bytes reach the worker
  peers.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  w.signal(SIGCONT);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  expect_serves_honestly(w);
}

TEST_F(HostilePeer, HelloWithAnotherModelLearnsNothing) {
  auto c = net::connect(w.address(), hearth::testing::keyed());
  net::Hello h;
  h.model = net::ModelIdentity{123, 456};
  h.data_endpoint = "tcp://127.0.0.1:9";
  c->send(h);
  const auto env = c->recv(net::Millis{5000}, "answer");
  const auto* r = std::get_if<net::Refuse>(&env.body);
  ASSERT_NE(r, nullptr) << net::msg_type_name(env.header.type);
  EXPECT_NE(r->reason.find("different model"), std::string::npos) << r->reason;
  expect_serves_honestly(w);
}

TEST_F(HostilePeer, StrangersDuringASessionAreRefusedAndTheSessionGoesOn) {
  Owner o(w.address());
  for (int i = 0; i < 5; ++i) {
    net::TransportOptions quick;
    quick.linger_ms = 0;
    auto stranger = net::connect(w.address(), hearth::testing::keyed(quick));
    net::Hello h;
    h.model = identity();
    h.data_endpoint = "tcp://127.0.0.1:9";
    stranger->send(h);
    stranger->send(net::Stop{"not yours"});
  }
  {
    auto stranger = net::connect(w.address(), hearth::testing::keyed());
    net::Hello h;
    h.model = identity();
    h.data_endpoint = "tcp://127.0.0.1:9";
    stranger->send(h);
    EXPECT_TRUE(
        std::holds_alternative<net::Refuse>(stranger->recv(net::Millis{5000}, "Refuse").body));
  }
  ASSERT_EQ(o.send_assign(o.assign()), "Ready") << w.log();
  o.control->send(net::Ping{7, 0});
  const auto pong = o.control->recv(net::Millis{5000}, "Pong");
  EXPECT_TRUE(std::holds_alternative<net::Pong>(pong.body));
  o.control->send(net::Stop{"done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_serves_honestly(w);
}

TEST_F(HostilePeer, AssignsBeyondTheDeviceAreRefused) {
  struct Case {
    const char* field;
    void (*edit)(net::Assign&);
  };
  const Case cases[] = {
      {"n_threads", [](net::Assign& a) { a.n_threads = 100000; }},
      {"n_seq_max", [](net::Assign& a) { a.n_seq_max = 100000; }},
      {"n_ctx", [](net::Assign& a) { a.n_ctx = 0xffffffffu; }},
      {"KV caches",
       [](net::Assign& a) {
         a.n_ctx = 1u << 20;
         a.n_seq_max = 1024;
       }},
      {"successor_endpoint", [](net::Assign& a) { a.successor_endpoint = "ipc:///tmp/x"; }},
      {"successor_endpoint", [](net::Assign& a) { a.successor_endpoint = "tcp://127.0.0.1:0"; }},
      {"wrap_endpoint", [](net::Assign& a) { a.wrap_endpoint = "ipc:///tmp/x"; }},
      {"wrap_endpoint",  // only the last device hands rounds on to the first
       [](net::Assign& a) {
         a.n_devices = 3;
         a.wrap_endpoint = a.successor_endpoint;
       }},
      {"rounds",
       [](net::Assign& a) {
         a.windows.assign(100, net::LayerRange{0, 0});
       }},
  };
  for (const Case& c : cases) {
    Owner o(w.address());
    net::Assign a = o.assign();
    c.edit(a);
    const std::string answer = o.send_assign(a);
    EXPECT_NE(answer.find(c.field), std::string::npos) << c.field << ": " << answer;
  }
  expect_serves_honestly(w);
}

// Three batches of 2000 new sequences (each would get a KV cache; 2000 rows is what one
// message to this inbox may carry) to a session allowed two.
TEST_F(HostilePeer, SequencesBeyondTheSessionAreDropped) {
  Owner o(w.address());
  ASSERT_EQ(o.send_assign(o.assign(2)), "Ready") << w.log();
  auto data = net::connect(o.ack.data_endpoint, hearth::testing::keyed());
  const uint64_t rss0 = rss_bytes(w.pid());
  for (uint32_t i = 0; i < 3; ++i) data->send(batch(100 + i * 2000, 2000), 1000 + i);
  // Two sequences fit: that batch is computed and comes back; the floods never do.
  data->send(batch(0, 2), 7);
  const auto back = o.inbox->recv(net::Millis{10000}, "the hidden state");
  EXPECT_EQ(back.msg.header.request_id, 7u);
  EXPECT_EQ(std::get<net::Activations>(back.msg.body).segments.size(), 2u);
  // A third sequence while two are held is dropped too.
  data->send(batch(5, 1), 8);
  EXPECT_FALSE(o.inbox->recv_for(net::Millis{500}).has_value());
  const uint64_t rss1 = rss_bytes(w.pid());
  EXPECT_LT(rss1, rss0 + (64u << 20)) << "RSS " << (rss0 >> 20) << " -> " << (rss1 >> 20) << " MiB";
  EXPECT_NE(w.log().find("exceed the session"), std::string::npos) << w.log();
  // Once the owner frees one, a new sequence fits.
  o.control->send(net::KvControl{{net::KvCommand{net::KvOp::kClear, 0, 0, 0}}});
  data->send(batch(5, 1), 9);
  EXPECT_EQ(o.inbox->recv(net::Millis{10000}, "the hidden state").msg.header.request_id, 9u);
  o.control->send(net::Stop{"done"});
}

TEST_F(HostilePeer, OversizedFramesCloseOnlyTheirLink) {
  {
    auto c = net::connect(w.address(), hearth::testing::keyed());
    std::vector<uint8_t> big(4u << 20, 0x41);
    c->send_raw(big);
  }
  Owner o(w.address());
  {
    auto data = net::connect(o.ack.data_endpoint, hearth::testing::keyed());
    std::vector<uint8_t> big(64u << 20, 0x42);  // more than any batch of this model
    data->send_raw(big);
  }
  ASSERT_EQ(o.send_assign(o.assign()), "Ready") << w.log();
  o.control->send(net::Stop{"done"});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_serves_honestly(w);
}

// Random well-formed messages of every type, from several peers, to the control port and the
// data inbox, in random order; each peer then says Stop (ending a session it may have
// started). The worker must still serve an honest session.
TEST_F(HostilePeer, RandomSessionsFromManyPeers) {
  std::mt19937_64 rng(17);
  const auto id = identity();
  std::vector<std::unique_ptr<net::Connection>> peers;
  std::vector<std::unique_ptr<net::Listener>> inboxes;
  for (int i = 0; i < 4; ++i) {
    peers.push_back(net::connect(w.address(), hearth::testing::keyed()));
    inboxes.push_back(net::listen("tcp://127.0.0.1:0", hearth::testing::keyed()));
  }
  std::unique_ptr<net::Connection> data;
  const auto pick = [&](uint64_t n) { return static_cast<uint32_t>(rng() % n); };
  for (int step = 0; step < 400; ++step) {
    const uint32_t p = pick(4);
    net::Message m;
    switch (pick(9)) {
      case 0: {
        net::Hello h;
        h.model = pick(4) == 0 ? net::ModelIdentity{rng(), rng()} : id;
        h.data_endpoint = pick(3) == 0 ? "ipc://x" : inboxes[p]->endpoint();
        m = h;
        break;
      }
      case 1: {
        net::Assign a;
        a.ring_position = pick(3);
        a.n_devices = pick(4);
        a.n_layers = pick(3) == 0 ? pick(100) : kLayers;
        for (uint32_t r = 0, n = pick(4); r < n; ++r) {
          const uint32_t b = pick(kLayers + 2);
          a.windows.push_back(net::LayerRange{b, b + pick(3)});
        }
        a.successor_endpoint =
            pick(2) ? inboxes[p]->endpoint() : "tcp://127.0.0.1:" + std::to_string(pick(70000));
        a.n_ctx = pick(2) ? pick(256) : static_cast<uint32_t>(rng());
        a.n_threads = pick(4);
        a.n_seq_max = pick(2) ? pick(4) : static_cast<uint32_t>(rng());
        m = a;
        break;
      }
      case 2: {
        net::KvControl kv;
        kv.commands.push_back(net::KvCommand{pick(2) ? net::KvOp::kClear : net::KvOp::kRemove,
                                             pick(8), pick(70), pick(70)});
        m = kv;
        break;
      }
      case 3:
        m = net::Ping{rng(), rng()};
        break;
      case 4:
        m = net::Profile{""};
        break;
      case 5:
        m = net::Stats{pick(3), rng(), {}};
        break;
      case 6:
        m = net::ErrorMsg{"boo"};
        break;
      case 7: {
        net::Activations a = batch(pick(6), 1 + pick(3));
        a.round = pick(3);
        a.next_layer = pick(kLayers + 1);
        a.segments[0].pos0 = pick(3);
        m = a;
        break;
      }
      default:
        m = net::Stop{"random"};
        break;
    }
    if (std::holds_alternative<net::Activations>(m) && pick(2) == 0) {
      // The data inbox (its address is only learned from a HelloAck).
      try {
        if (data) data->send(m, rng());
      } catch (const UsageError&) {
      }
      continue;
    }
    try {
      peers[p]->send(m, rng());
    } catch (const UsageError&) {
      continue;  // the encoder refuses what the decoder would drop (wire_test covers both)
    }
    while (auto env = peers[p]->recv_for(net::Millis{0})) {
      if (const auto* ack = std::get_if<net::HelloAck>(&env->body); ack && !data) {
        data = net::connect(ack->data_endpoint, hearth::testing::keyed());
      }
    }
  }
  for (auto& c : peers) c->send(net::Stop{"end of the test"});
  // Each peer's messages arrive in order: its Ping answered means the worker has read them all
  // (a Ping during another peer's session gets no answer, so it is sent again).
  size_t answered = 0;
  for (size_t i = 0; i < peers.size(); ++i) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool pong = false;
    while (!pong && std::chrono::steady_clock::now() < deadline) {
      peers[i]->send(net::Ping{1000 + i, 0});
      while (auto env = peers[i]->recv_for(net::Millis{500})) {
        const auto* p = std::get_if<net::Pong>(&env->body);
        if (p != nullptr && p->nonce == 1000 + i) {
          pong = true;
          break;
        }
      }
    }
    answered += pong ? 1 : 0;
  }
  EXPECT_EQ(answered, peers.size()) << w.log();
  // Sessions the peers began end with their Stop, or after the worker's 15 s wait for an Assign.
  expect_serves_honestly(w, std::chrono::seconds(30));
}

}  // namespace
}  // namespace hearth::cluster
