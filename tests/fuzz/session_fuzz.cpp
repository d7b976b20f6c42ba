// libFuzzer target for the worker's session logic (cluster::Worker, issue 17): one worker
// serves in this process over loop:// for the whole run, and each input is a small program of
// peers that connect, say Hello (right or wrong model), Assign (fields from the input, valid
// or extreme), send Activations, KvControl, Stop, Ping, Profile, Stats and raw bytes on the
// control and data links, in any order. The wire codec is the real one (loop:// encodes and
// decodes every message), so malformed frames reach the decoder and well-formed hostile ones
// reach the session.
// Checked after every input: the worker still answers a Ping from a new peer, and every 16th
// input an honest session (Hello, Assign of every layer, one token through, Stop) still gives
// a final hidden state. A crash, a sanitizer report, an exception escaping the worker's thread
// (std::terminate) or a failed check (trap) is a bug.
// Build: HEARTH_FUZZ=ON with clang, target session_fuzz; run e.g.
//   build-fuzz/bin/session_fuzz -max_total_time=120 -max_len=2048 corpus-session
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/cluster/worker.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/transport.h"
#include "support/synth_model.h"

namespace {

using namespace hearth;

constexpr uint32_t kLayers = 4, kDim = 64;
const std::string kWorker = "loop://session-fuzz-worker";
const std::string kWorkerInbox = kWorker + "-data";  // cluster::inbox_bind_address

net::ModelIdentity g_identity;
int g_peer_names = 0;

// The input, read front to back; zeros once it runs out.
struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint32_t u32() { return u8() | (u8() << 8) | (u8() << 16) | (static_cast<uint32_t>(u8()) << 24); }
  bool empty() const { return n == 0; }
};

struct Peer {
  std::unique_ptr<net::Connection> control;
  std::unique_ptr<net::Connection> data;  // to the worker's inbox
  std::unique_ptr<net::Listener> inbox;   // where the worker sends hidden states to us
  bool hello = false;
};

std::string start_worker() {
  ::setenv("HEARTH_LOG", "error", 1);  // every dropped message would be a warning
  const auto path = std::filesystem::temp_directory_path() /
                    ("hearth-session-fuzz-" + std::to_string(::getpid()) + ".gguf");
  hearth::testing::write_model(path.string(), {int{kLayers}, int{kDim}, 4, 2, 128, 512, "q8_0", 5});
  g_identity = cluster::model_identity(gguf::GgufFile::open(path.string()));
  cluster::WorkerOptions wo;
  wo.listen = kWorker;
  wo.model_path = path.string();
  wo.threads = 1;
  // The worker lives until exit; the handler registered after it (so run before the
  // transport's statics go) stops its thread first.
  static std::atomic<bool> stop{false};
  static auto* worker = new cluster::Worker(wo);
  static std::thread serving([] { worker->serve(stop); });
  std::atexit([] {
    stop = true;
    if (serving.joinable()) serving.join();
  });
  return path.string();
}

std::string pick_endpoint(Input& in, const Peer& p) {
  switch (in.u8() % 5) {
    case 0:
      return "";
    case 1:
      return "tcp://10.1.2.3:9";
    case 2:
      return "loop://nobody-" + std::to_string(in.u8());
    case 3:
      return kWorkerInbox;
    default:
      return p.inbox ? p.inbox->endpoint() : "";
  }
}

uint32_t pick_u32(Input& in, uint32_t usual_mod) {
  const uint8_t how = in.u8();
  if (how % 8 == 0) return in.u32();  // extreme values now and then
  return usual_mod == 0 ? how : how % usual_mod;
}

// Sends are allowed to fail (a peer link may be gone): only the worker's survival counts.
template <typename F>
void attempt(F f) {
  try {
    f();
  } catch (const Error&) {
  }
}

void run_program(Input& in, std::vector<Peer>& peers) {
  for (int op = 0; op < 64 && !in.empty(); ++op) {
    const uint8_t code = in.u8();
    if (code % 9 == 0 || peers.empty()) {
      if (peers.size() >= 4) continue;
      Peer p;
      attempt([&] {
        p.control = net::connect(kWorker);
        p.inbox = net::listen("loop://session-fuzz-peer-" + std::to_string(g_peer_names++));
      });
      if (p.control && p.inbox) peers.push_back(std::move(p));
      continue;
    }
    Peer& p = peers[in.u8() % peers.size()];
    switch (code % 9) {
      case 1: {
        net::Hello h;
        h.model = g_identity;
        if (in.u8() % 4 == 0) h.model.hash ^= 1;  // another model
        h.device_name = "fuzz";
        h.data_endpoint = in.u8() % 4 == 0 ? pick_endpoint(in, p) : p.inbox->endpoint();
        attempt([&] { p.control->send(h, in.u32()); });
        p.hello = true;
        break;
      }
      case 2: {
        net::Assign a;
        a.ring_position = pick_u32(in, 4);
        a.n_devices = pick_u32(in, 5);
        a.n_layers = in.u8() % 4 == 0 ? pick_u32(in, 8) : kLayers;
        const uint32_t nw = in.u8() % 4;
        uint32_t at = 0;
        for (uint32_t w = 0; w < nw; ++w) {
          const uint32_t len = in.u8() % 4;
          a.windows.push_back({at, at + len});
          at += len + in.u8() % 2;
        }
        a.successor_endpoint = in.u8() % 4 == 0 ? pick_endpoint(in, p) : p.inbox->endpoint();
        if (in.u8() % 4 == 0) a.wrap_endpoint = pick_endpoint(in, p);
        a.prefetch = in.u8() % 2 == 0;
        a.n_ctx = in.u8() % 4 == 0 ? pick_u32(in, 0) << 8 : 64;
        a.n_threads = pick_u32(in, 3);
        a.n_seq_max = pick_u32(in, 5);
        attempt([&] { p.control->send(a); });
        break;
      }
      case 3: {
        net::Activations act;
        act.round = in.u8() % 3;
        act.next_layer = in.u8() % (kLayers + 1);
        act.final = in.u8() % 8 == 0;
        act.dim = in.u8() % 8 == 0 ? pick_u32(in, 200) : kDim;
        const uint32_t nseg = 1 + in.u8() % 3;
        size_t rows = 0;
        for (uint32_t s = 0; s < nseg; ++s) {
          net::SeqSegment seg{pick_u32(in, 6), pick_u32(in, 8), 1u + in.u8() % 3};
          if (seg.pos0 > 0xFFFF0000u) seg.pos0 = 0xFFFF0000u;  // the encoder refuses overflow
          rows += seg.n_tokens;
          act.segments.push_back(seg);
        }
        const size_t dim = act.dim <= 4096 ? act.dim : 1;
        act.hidden.assign(in.u8() % 8 == 0 ? rows : rows * dim, 0.01f * in.u8());
        attempt([&] {
          if (!p.data) p.data = net::connect(kWorkerInbox);
          p.data->send(act, in.u8() % 4 == 0 ? in.u32() : 1);
        });
        break;
      }
      case 4: {
        net::KvControl kv;
        for (uint32_t c = in.u8() % 3; c > 0; --c) {
          kv.commands.push_back({in.u8() % 2 == 0 ? net::KvOp::kClear : net::KvOp::kRemove,
                                 pick_u32(in, 6), pick_u32(in, 8), pick_u32(in, 0)});
        }
        attempt([&] { p.control->send(kv); });
        break;
      }
      case 5: {
        const uint8_t which = in.u8() % 5;
        attempt([&] {
          if (which == 0) p.control->send(net::Stop{"fuzz"});
          if (which == 1) p.control->send(net::Ping{in.u32(), 0}, in.u32());
          if (which == 2) p.control->send(net::Profile{""});
          if (which == 3) p.control->send(net::Stats{1, 2, {{"compute_ms", 1.0}}});
          if (which == 4) p.control->send(net::Load{});
        });
        break;
      }
      case 6: {
        std::vector<uint8_t> raw(in.u8() % 64);
        for (auto& b : raw) b = in.u8();
        const bool on_data = in.u8() % 2 == 0;
        attempt([&] {
          if (on_data && !p.data) p.data = net::connect(kWorkerInbox);
          (on_data ? *p.data : *p.control).send_raw(raw);
        });
        break;
      }
      case 7:
        attempt([&] {
          while (p.control->recv_for(net::Millis{0})) {
          }
          while (p.inbox->recv_for(net::Millis{0})) {
          }
        });
        break;
      default:
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        break;
    }
  }
}

// A new peer's Ping is answered within `limit` (the worker may first have to notice that the
// program's peers are gone).
bool answers_ping(std::chrono::seconds limit) {
  try {
    auto c = net::connect(kWorker);
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      c->send(net::Ping{77, 0}, 77);
      const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      while (std::chrono::steady_clock::now() < end) {
        auto env = c->recv_for(net::Millis{50});
        if (env && std::holds_alternative<net::Pong>(env->body)) return true;
      }
    }
  } catch (const Error&) {
  }
  return false;
}

// An honest head still gets its token through every layer.
bool serves_an_honest_session() {
  try {
    auto control = net::connect(kWorker);
    auto inbox = net::listen("loop://session-fuzz-honest-" + std::to_string(g_peer_names++));
    net::Hello h;
    h.model = g_identity;
    h.device_name = "honest";
    h.data_endpoint = inbox->endpoint();
    control->send(h);
    const auto ack = control->recv(net::Millis{20000}, "HelloAck");
    if (!std::holds_alternative<net::HelloAck>(ack.body)) return false;
    net::Assign a;
    a.ring_position = 1;
    a.n_devices = 2;
    a.n_layers = kLayers;
    a.windows = {{0, kLayers}};
    a.successor_endpoint = inbox->endpoint();
    a.n_ctx = 64;
    a.n_threads = 1;
    control->send(a);
    for (;;) {
      const auto env = control->recv(net::Millis{20000}, "Ready");
      if (std::holds_alternative<net::Ready>(env.body)) break;
      if (std::holds_alternative<net::ErrorMsg>(env.body)) return false;
    }
    auto data = net::connect(std::get<net::HelloAck>(ack.body).data_endpoint);
    net::Activations act;
    act.dim = kDim;
    act.segments = {{0, 0, 1}};
    act.hidden.assign(kDim, 0.01f);
    data->send(act, 42);
    bool ok = false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!ok && std::chrono::steady_clock::now() < until) {
      auto in = inbox->recv_for(net::Millis{100});
      const auto* back = in ? std::get_if<net::Activations>(&in->msg.body) : nullptr;
      ok = back != nullptr && back->final && back->dim == kDim && back->hidden.size() == kDim;
    }
    control->send(net::Stop{"honest session done"});
    return ok;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string model = start_worker();
  static uint64_t inputs = 0;
  Input in{data, size};
  {
    std::vector<Peer> peers;
    run_program(in, peers);
    for (auto& p : peers) {
      if (p.hello) attempt([&] { p.control->send(net::Stop{"program done"}); });
    }
  }  // the peers' links and inboxes go away: a session they held ends
  if (!answers_ping(std::chrono::seconds(30))) __builtin_trap();
  if (++inputs % 16 == 0 && !serves_an_honest_session()) __builtin_trap();
  return 0;
}
