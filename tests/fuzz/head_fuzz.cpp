// libFuzzer target for the head's side of the ring (cluster::RingSource, issue 17): each input
// is a program for a hostile worker on loop:// that the head greets, assigns and sends a
// token to. The worker answers Hello and Assign with the right or wrong message and fields
// (another model, bad or foreign endpoints, Refuse, ErrorMsg, silence), sends the head's inbox
// Activations with right or wrong step ids, widths, rows, segments and flags, Stats and Pongs
// on the control link, and raw bytes from strangers to the head's inbox. The head runs in a
// thread with short timeouts: it must return or throw hearth::Error, within a bound. The wire
// codec is the real one.
// Checked after every 16th input: a head with a real in-process worker still gets its token
// through. A crash, a sanitizer report, another exception or a trap is a bug.
// Build: HEARTH_FUZZ=ON with clang, target head_fuzz; run e.g.
//   build-fuzz/bin/head_fuzz -max_total_time=120 -max_len=1024 corpus-head
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/cluster/worker.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/transport.h"
#include "support/synth_model.h"

namespace {

using namespace hearth;

constexpr uint32_t kLayers = 4, kDim = 64;

struct Shared {
  std::string path;
  std::unique_ptr<gguf::GgufFile> file;
  net::ModelIdentity identity;
};

Shared& shared() {
  static Shared s = [] {
    ::setenv("HEARTH_LOG", "error", 1);
    Shared out;
    out.path = (std::filesystem::temp_directory_path() /
                ("hearth-head-fuzz-" + std::to_string(::getpid()) + ".gguf"))
                   .string();
    hearth::testing::write_model(out.path, {int{kLayers}, int{kDim}, 4, 2, 128, 512, "q8_0", 5});
    out.file = std::make_unique<gguf::GgufFile>(gguf::GgufFile::open(out.path));
    out.identity = cluster::model_identity(*out.file);
    return out;
  }();
  return s;
}

int g_names = 0;

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

template <typename F>
void attempt(F f) {
  try {
    f();
  } catch (const Error&) {
  }
}

cluster::RingOptions head_options(const std::string& worker) {
  cluster::RingOptions o;
  o.workers = {worker};
  o.plan = {2, 2};
  o.threads = 1;
  o.n_ctx = 64;
  o.handshake_timeout_ms = 100;
  o.step_timeout_ms = 150;
  o.transport.send_timeout_ms = 100;
  return o;
}

// The head: set up, then one token. Returns how it ended; traps on anything but Error.
struct HeadRun {
  std::atomic<bool> done{false};
  bool evaluated = false;
  std::thread thread;
  explicit HeadRun(const std::string& worker) {
    thread = std::thread([this, worker] {
      try {
        cluster::RingSource ring(*shared().file, head_options(worker));
        std::vector<float> logits(static_cast<size_t>(ring.vocab()));
        const int32_t token = 1;
        ring.eval(0, {&token, 1}, logits.data());
        evaluated = true;
      } catch (const Error&) {
      } catch (...) {
        __builtin_trap();  // anything but a hearth::Error escaping the head is a bug
      }
      done = true;
    });
  }
  void join() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!done) __builtin_trap();  // the head hung
    thread.join();
  }
};

std::string pick_endpoint(Input& in, const std::string& mine) {
  switch (in.u8() % 5) {
    case 0:
      return "";
    case 1:
      return "tcp://10.1.2.3:9";
    case 2:
      return "loop://nobody-" + std::to_string(in.u8());
    case 3:
      return "tcp://0.0.0.0:0";
    default:
      return mine;
  }
}

net::Activations hostile_activations(Input& in) {
  net::Activations act;
  act.round = in.u8() % 3;
  act.next_layer = in.u8() % (kLayers + 2);
  act.final = in.u8() % 4 != 0;
  act.dim = in.u8() % 6 == 0 ? in.u8() : kDim;
  const uint32_t nseg = in.u8() % 3;
  size_t rows = 0;
  for (uint32_t s = 0; s < nseg; ++s) {
    net::SeqSegment seg{in.u8() % 3u, in.u8() % 4u, 1u + in.u8() % 3};
    rows += seg.n_tokens;
    act.segments.push_back(seg);
  }
  const size_t dim = act.dim;
  act.hidden.assign(in.u8() % 6 == 0 ? rows : rows * dim, 0.01f * in.u8());
  return act;
}

// The hostile worker, driven by the input while the head runs.
void play_worker(Input& in, net::Listener& control, net::Listener& data, HeadRun& head) {
  std::optional<net::PeerId> head_peer;
  std::string head_inbox;
  uint64_t last_step = 0;
  std::unique_ptr<net::Connection> to_head;
  for (int op = 0; op < 48 && !head.done; ++op) {
    if (in.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // silent: the head times out
      continue;
    }
    const uint8_t code = in.u8() % 6;
    if (code <= 1) {  // answer what the head sent on the control link
      auto msg = control.recv_for(net::Millis{30});
      if (!msg) continue;
      head_peer = msg->from;
      const uint8_t how = in.u8();
      if (const auto* h = std::get_if<net::Hello>(&msg->msg.body)) {
        head_inbox = h->data_endpoint;
        net::HelloAck ack;
        ack.model = shared().identity;
        if (how % 7 == 1) ack.model.hash ^= 1;
        if (how % 11 == 2) ack.protocol_version = static_cast<uint16_t>(in.u8());
        ack.device_name = std::string(in.u8() % 4 == 0 ? 300 : 3, 'w');
        ack.data_endpoint = how % 5 == 3 ? pick_endpoint(in, data.endpoint()) : data.endpoint();
        attempt([&] {
          if (how % 13 == 4) {
            control.send(msg->from, net::Refuse{"fuzz"});
          } else if (how % 17 == 5) {
            control.send(msg->from, net::ErrorMsg{"fuzz"});
          } else if (how % 19 != 6) {  // else silence
            control.send(msg->from, ack, msg->msg.header.request_id);
          }
        });
      } else if (std::holds_alternative<net::Assign>(msg->msg.body)) {
        attempt([&] {
          if (how % 5 == 1) {
            control.send(msg->from, net::ErrorMsg{"no"});
          } else if (how % 7 == 2) {
            control.send(msg->from, net::Pong{in.u32(), 0});
          } else if (how % 11 != 3) {
            control.send(msg->from, net::Ready{1.0, in.u32()});
          }
        });
      } else if (const auto* ping = std::get_if<net::Ping>(&msg->msg.body)) {
        attempt([&] {
          control.send(msg->from, net::Pong{how % 3 == 0 ? in.u32() : ping->nonce, 0},
                       msg->msg.header.request_id);
        });
      }
    } else if (code == 2) {  // read the head's token on the data inbox
      if (auto m = data.recv_for(net::Millis{20})) last_step = m->msg.header.request_id;
    } else if (code == 3) {  // a hidden state to the head's inbox, right step id or not
      if (head_inbox.empty()) continue;
      const uint8_t how = in.u8();
      const uint64_t rid = how % 3 == 0 ? in.u32() : last_step + how % 2;
      const auto act = hostile_activations(in);
      attempt([&] {
        if (!to_head) to_head = net::connect(head_inbox);
        to_head->send(act, rid);
      });
    } else if (code == 4) {  // control chatter: Stats, Pong, ErrorMsg
      if (!head_peer) continue;
      const uint8_t which = in.u8() % 4;
      attempt([&] {
        if (which == 0) {
          control.send(*head_peer, net::Stats{in.u8(), in.u32(), {{"compute_ms", 1.0}}});
        } else if (which == 1) {
          control.send(
              *head_peer,
              net::Stats{1, 1, std::vector<net::Metric>(in.u8(), net::Metric{"x", 1e300})});
        } else if (which == 2) {
          control.send(*head_peer, net::Pong{in.u32(), 0}, in.u32());
        } else {
          control.send(*head_peer, net::ErrorMsg{std::string(in.u8(), 'e')});
        }
      });
    } else {  // a stranger's raw bytes to the head's inbox
      if (head_inbox.empty()) continue;
      std::vector<uint8_t> raw(in.u8() % 64);
      for (auto& b : raw) b = in.u8();
      attempt([&] { net::connect(head_inbox)->send_raw(raw); });
    }
  }
}

// A head and a real worker in this process: the token gets through.
bool honest_ring_works() {
  const std::string addr = "loop://head-fuzz-honest-" + std::to_string(g_names++);
  cluster::WorkerOptions wo;
  wo.listen = addr;
  wo.model_path = shared().path;
  wo.threads = 1;
  std::atomic<bool> stop{false};
  cluster::Worker worker(wo);
  std::thread serving([&] { worker.serve(stop); });
  bool ok = false;
  try {
    auto o = head_options(addr);
    o.handshake_timeout_ms = 10000;
    o.step_timeout_ms = 20000;
    cluster::RingSource ring(*shared().file, o);
    std::vector<float> logits(static_cast<size_t>(ring.vocab()));
    const int32_t token = 1;
    ring.eval(0, {&token, 1}, logits.data());
    ok = true;
  } catch (const Error&) {
  }
  stop = true;
  serving.join();
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t inputs = 0;
  Input in{data, size};
  const std::string addr = "loop://head-fuzz-worker-" + std::to_string(g_names++);
  {
    auto control = net::listen(addr);
    auto inbox = net::listen(addr + "-data");
    HeadRun head(addr);
    play_worker(in, *control, *inbox, head);
    head.join();
  }
  if (++inputs % 16 == 0 && !honest_ring_works()) __builtin_trap();
  return 0;
}
