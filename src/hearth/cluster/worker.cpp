#include "hearth/cluster/worker.h"

#include <fmt/core.h>

#include <algorithm>
#include <set>
#include <thread>
#include <variant>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/cluster/endpoints.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/cluster/peer_limits.h"
#include "hearth/cluster/prefetcher.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/model/engine.h"
#include "hearth/model/hparams.h"
#include "hearth/residency/device_meter.h"
#include "hearth/residency/memory_status.h"

namespace hearth::cluster {
namespace {

constexpr net::Millis kPoll{500};
constexpr net::Millis kAssignWait{15000};

// Checks an Assign against the model and this device before anything is allocated or
// connected to: UsageError naming the field at fault. `own_endpoint` is this worker's control
// address (the successor must use its scheme).
// The head's KV cache types (the wire reader has checked that they are types).
compute::KvTypes kv_types(const net::Assign& a) {
  return {static_cast<compute::KvType>(a.kv_type_k), static_cast<compute::KvType>(a.kv_type_v)};
}

void check_assign(const net::Assign& a, const model::HParams& hp, const std::string& own_endpoint) {
  const uint32_t n_layers = hp.n_layers;
  if (a.n_layers != n_layers) {
    throw UsageError(
        fmt::format("Assign: the head's model has {} layers, this one {}", a.n_layers, n_layers));
  }
  if (a.ring_position == 0 || a.ring_position >= a.n_devices) {
    throw UsageError(fmt::format("Assign: ring position {} of {} devices is not a worker's",
                                 a.ring_position, a.n_devices));
  }
  if (a.windows.empty() || a.windows.size() > n_layers) {
    throw UsageError(
        fmt::format("Assign: {} rounds for a model of {} layers", a.windows.size(), n_layers));
  }
  uint32_t prev_end = 0;
  uint64_t layers_here = 0;
  for (size_t r = 0; r < a.windows.size(); ++r) {
    const auto& w = a.windows[r];
    if (w.begin == w.end) continue;
    if (w.begin > w.end || w.end > n_layers || (layers_here > 0 && w.begin < prev_end)) {
      throw UsageError(fmt::format("Assign: window {} [{}, {}) is not ascending inside [0, {})", r,
                                   w.begin, w.end, n_layers));
    }
    prev_end = w.end;
    layers_here += w.end - w.begin;
  }
  if (layers_here == 0) throw UsageError("Assign: no layers for this device");
  if (a.successor_endpoint.empty()) throw UsageError("Assign: no successor endpoint");
  check_peer_endpoint("Assign.successor_endpoint", a.successor_endpoint, own_endpoint);
  if (!a.wrap_endpoint.empty()) {
    if (a.ring_position + 1 != a.n_devices) {
      throw UsageError(fmt::format("Assign.wrap_endpoint given to device {} of {}, not the last",
                                   a.ring_position, a.n_devices));
    }
    check_peer_endpoint("Assign.wrap_endpoint", a.wrap_endpoint, own_endpoint);
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (a.n_threads > cores) {
    throw UsageError(
        fmt::format("Assign.n_threads {} is more than this device's {} cores", a.n_threads, cores));
  }
  if (a.n_seq_max == 0 || a.n_seq_max > kMaxSessionSequences) {
    throw UsageError(
        fmt::format("Assign.n_seq_max {} is outside 1..{}", a.n_seq_max, kMaxSessionSequences));
  }
  if (a.n_ctx > (1u << 20)) {
    throw UsageError(fmt::format("Assign.n_ctx {} is more than {} positions", a.n_ctx, 1u << 20));
  }
  // The KV caches the head may fill must fit the device at all (0: the engine's default).
  const uint64_t n_ctx = a.n_ctx != 0 ? a.n_ctx : static_cast<uint64_t>(model::default_n_ctx(hp));
  const uint64_t kv = compute::KvCache::bytes_for(
                          static_cast<int>(layers_here), static_cast<int>(hp.n_kv_heads),
                          static_cast<int>(hp.head_dim), static_cast<int64_t>(n_ctx), kv_types(a)) *
                      a.n_seq_max;
  const uint64_t total = residency::read_memory_status().total;
  if (kv > total) {
    throw UsageError(fmt::format(
        "Assign: KV caches for {} sequences of {} positions need {} MiB, this device has {} MiB",
        a.n_seq_max, n_ctx, kv >> 20, total >> 20));
  }
}

// Checks the sequences of a batch against the session before the engine sees it: each
// sequence once, and no more live sequences than the session allows. FormatError: the batch
// is dropped (anyone can reach the inbox).
void check_sequences(const net::Activations& act, const model::Engine& engine, uint32_t n_seq_max) {
  std::set<uint32_t> seen;
  size_t fresh = 0;
  for (const net::SeqSegment& seg : act.segments) {
    if (!seen.insert(seg.seq).second) {
      throw FormatError(fmt::format("Activations: sequence {} appears twice", seg.seq));
    }
    if (!engine.has_sequence(seg.seq)) ++fresh;
  }
  if (engine.n_sequences() + fresh > n_seq_max) {
    throw FormatError(fmt::format(
        "Activations: {} new sequences beside {} held would exceed the session's {} sequences",
        fresh, engine.n_sequences(), n_seq_max));
  }
}

}  // namespace

struct Worker::Session {
  net::PeerId head;
  std::string head_label;
  net::Assign assign;
  std::unique_ptr<Stage> stage;                 // engine, residency and meter of this device
  std::unique_ptr<net::Connection> head_inbox;  // final hidden states go straight back
  std::unique_ptr<net::Connection> successor;   // null when the successor is the head
  std::unique_ptr<net::Connection> wrap;        // last device, head without layers: next round
};

Worker::Worker(WorkerOptions options)
    : opt_(std::move(options)), file_(gguf::GgufFile::open(opt_.model_path)) {
  identity_ = model_identity(file_);
  const model::HParams hp = model::load_hparams(file_);
  // Each socket takes no more per message than an honest peer can need: whoever reaches a
  // port could otherwise make the worker buffer the transport's whole limit per connection.
  net::TransportOptions control = opt_.transport;
  control.max_message_bytes = std::min(control.max_message_bytes, kControlMessageBytes);
  net::TransportOptions data = opt_.transport;
  data.max_message_bytes =
      std::min(data.max_message_bytes, data_message_bytes(hp.dim, inbox_rows_bound(hp)));
  control_ = net::listen(opt_.listen, control);
  inbox_ = net::listen(inbox_bind_address(control_->endpoint()), data);
  if (opt_.name.empty()) opt_.name = control_->endpoint();
}

Worker::~Worker() = default;

// --plan auto set-up (docs/ring.md): before Assign the head may ask for this device's
// profile (a Profile with empty json) and time the link (Ping, and Activations of one
// hidden state, each answered with a Pong carrying the request id).
bool Worker::answer_setup_probe(const net::Envelope& msg, const net::PeerId& head) {
  const uint64_t rid = msg.header.request_id;
  if (std::holds_alternative<net::Profile>(msg.body)) {
    if (!profile_json_ && opt_.profile) profile_json_ = opt_.profile();
    control_->send(head, net::Profile{profile_json_.value_or("")}, rid);
  } else if (const auto* ping = std::get_if<net::Ping>(&msg.body)) {
    control_->send(head, net::Pong{ping->nonce, ping->send_ns}, rid);
  } else if (std::holds_alternative<net::Activations>(msg.body)) {
    control_->send(head, net::Pong{rid, 0}, rid);
  } else {
    return false;
  }
  return true;
}

const std::string& Worker::endpoint() const {
  return control_->endpoint();
}

bool Worker::reply(const net::PeerId& to, const net::Message& m, uint64_t request_id) noexcept {
  try {
    control_->send(to, m, request_id);
    return true;
  } catch (const std::exception& e) {
    log::warn("worker {}: could not send {}: {}", control_->endpoint(),
              net::msg_type_name(net::type_of(m)), e.what());
    return false;
  }
}

void Worker::serve(const std::atomic<bool>& stop) {
  stop_ = &stop;
  log::info("worker {}: serving {} ({}), data inbox {}", control_->endpoint(), opt_.model_path,
            describe(identity_), inbox_->endpoint());
  while (!stop.load()) {
    auto in = control_->recv_for(kPoll);
    // Activations left over from an earlier head are of no use now.
    while (inbox_->recv_for(net::Millis{0})) {
    }
    if (!in) continue;
    if (std::holds_alternative<net::Hello>(in->msg.body)) {
      busy_ = true;
      try {
        run_session(*in);
      } catch (const Error& e) {
        log::warn("worker {}: session with {} ended: {}", control_->endpoint(), in->peer, e.what());
        reply(in->from, net::ErrorMsg{fmt::format("worker {}: {}", opt_.name, e.what())});
      }
      busy_ = false;
      log::info("worker {}: waiting for a head", control_->endpoint());
    } else if (const auto* ping = std::get_if<net::Ping>(&in->msg.body)) {
      reply(in->from, net::Pong{ping->nonce, ping->send_ns}, in->msg.header.request_id);
    } else {
      log::warn("worker {}: ignored {} from {}: no session (send Hello first)",
                control_->endpoint(), net::msg_type_name(in->msg.header.type), in->peer);
    }
  }
}

void Worker::run_session(const net::Incoming& hello_in) {
  const auto& hello = std::get<net::Hello>(hello_in.msg.body);
  Session s;
  s.head = hello_in.from;
  s.head_label = hello_in.peer;
  log::info("worker {}: head {} ({}) connected", control_->endpoint(), hello.device_name,
            hello_in.peer);
  // The peer's claims are checked before this device says anything about itself.
  if (hello.model != identity_) {
    log::warn("worker {}: head {} runs another model ({}; this worker: {}); session refused",
              control_->endpoint(), hello_in.peer, describe(hello.model), describe(identity_));
    reply(s.head,
          net::Refuse{fmt::format("worker {} holds a different model file than the head; every "
                                  "device needs the same file",
                                  opt_.name)},
          hello_in.msg.header.request_id);
    return;
  }
  if (hello.data_endpoint.empty()) throw UsageError("Hello: the head announced no data inbox");
  net::HelloAck ack;
  ack.model = identity_;
  ack.capabilities = net::kCapPrefetch | net::kCapBatching;
  ack.device_name = opt_.name;
  ack.data_endpoint = inbox_->endpoint();
  control_->send(s.head, ack, hello_in.msg.header.request_id);

  // Wait for the assignment from this head (others are told we are busy).
  const double deadline = now_ms() + static_cast<double>(kAssignWait.count());
  for (;;) {
    const double left = deadline - now_ms();
    if (left <= 0) throw NetError(fmt::format("head {} sent no Assign", hello_in.peer));
    if (stop_->load()) return;
    auto in = control_->recv_for(std::min(kPoll, net::Millis{static_cast<int64_t>(left) + 1}));
    if (!in) continue;
    if (in->from != s.head) {
      if (std::holds_alternative<net::Hello>(in->msg.body)) {
        reply(in->from, net::Refuse{fmt::format("worker {} is busy with another head", opt_.name)});
      }
      continue;
    }
    if (std::holds_alternative<net::Stop>(in->msg.body)) return;
    if (auto* a = std::get_if<net::Assign>(&in->msg.body)) {
      s.assign = std::move(*a);
      break;
    }
    if (answer_setup_probe(in->msg, s.head)) continue;
    log::warn("worker {}: ignored {} before Assign", control_->endpoint(),
              net::msg_type_name(in->msg.header.type));
  }

  const double t0 = now_ms();
  const model::HParams hp = model::load_hparams(file_);
  const uint32_t n_layers = hp.n_layers;
  check_assign(s.assign, hp, control_->endpoint());
  // Checked only now: a --plan auto head's probing session names no inbox ("planning").
  check_peer_endpoint("Hello.data_endpoint", hello.data_endpoint, control_->endpoint());
  const size_t k = s.assign.windows.size();
  StageOptions so;
  so.threads = opt_.threads > 0 ? opt_.threads : static_cast<int>(s.assign.n_threads);
  so.n_ctx = s.assign.n_ctx;
  so.kv_types = kv_types(s.assign);
  for (const auto& w : s.assign.windows) {
    so.windows.push_back(Window{static_cast<int>(w.begin), static_cast<int>(w.end)});
  }
  so.with_output = false;  // the head computes the logits
  so.residency = opt_.residency;
  so.residency.prefetch = s.assign.prefetch;
  s.stage = std::make_unique<Stage>(file_, so);
  s.head_inbox = net::connect(hello.data_endpoint, opt_.transport);
  if (s.assign.successor_endpoint != hello.data_endpoint) {
    s.successor = net::connect(s.assign.successor_endpoint, opt_.transport);
  }
  if (!s.assign.wrap_endpoint.empty()) {
    s.wrap = net::connect(s.assign.wrap_endpoint, opt_.transport);
  }
  // The last round in which this device has layers ends its part of a token step.
  size_t last_round = 0;
  for (size_t r = 0; r < k; ++r) {
    if (!s.stage->window(static_cast<int>(r)).empty()) last_round = r;
  }
  double idle_since = 0;  // end of our last send; the time until the next hidden state is wait
  control_->send(s.head, net::Ready{now_ms() - t0, 0});
  size_t n_layers_here = 0;
  for (const auto& w : so.windows) n_layers_here += static_cast<size_t>(w.size());
  log::info("worker {}: device {} of {}, {} layers in {} rounds, successor {}",
            control_->endpoint(), s.assign.ring_position, s.assign.n_devices, n_layers_here, k,
            s.assign.successor_endpoint);

  const bool last = s.assign.ring_position + 1 == s.assign.n_devices;
  const uint32_t dim = s.stage->engine().hparams().dim;
  std::vector<model::BatchSegment> segments;  // (n_segments) of the batch being computed
  // One control message: false when the head said stop.
  const auto handle_control = [&](const net::Incoming& in) {
    if (in.from != s.head) {
      if (std::holds_alternative<net::Hello>(in.msg.body)) {
        reply(in.from, net::Refuse{fmt::format("worker {} is busy with another head", opt_.name)});
      }
      return true;
    }
    if (std::holds_alternative<net::Stop>(in.msg.body)) {
      log::info("worker {}: head {} said stop", control_->endpoint(), s.head_label);
      return false;
    }
    if (const auto* kv = std::get_if<net::KvControl>(&in.msg.body)) {
      for (const auto& c : kv->commands) {
        if (c.op == net::KvOp::kClear || c.p0 == 0) {
          s.stage->engine().drop(c.seq_id);
        } else {
          s.stage->engine().truncate(c.seq_id, c.p0);
        }
      }
    } else if (const auto* ping = std::get_if<net::Ping>(&in.msg.body)) {
      reply(s.head, net::Pong{ping->nonce, ping->send_ns}, in.msg.header.request_id);
    }
    return true;
  };
  // Control messages already here, or arriving within `wait`: the head's KvControl travels on
  // another link than the batch it precedes, so a batch is only judged after them.
  bool stopped = false;
  const auto drain_control = [&](net::Millis wait) {
    const double until = now_ms() + static_cast<double>(wait.count());
    for (;;) {
      const double left = until - now_ms();
      auto in = control_->recv_for(net::Millis{left > 0 ? static_cast<int64_t>(left) : 0});
      if (!in) return;
      if (!handle_control(*in)) stopped = true;
    }
  };
  while (!stop_->load() && !stopped) {
    net::Receiver* rs[] = {control_.get(), inbox_.get(), s.head_inbox.get()};
    const size_t which = net::wait_any(rs, kPoll);
    if (s.head_inbox->peer_lost()) {
      log::info("worker {}: head {} went away", control_->endpoint(), s.head_label);
      return;
    }
    if (which == 0) {
      auto in = control_->recv_for(net::Millis{0});
      if (in && !handle_control(*in)) return;
      continue;
    }
    if (which != 1) continue;
    auto in = inbox_->recv_for(net::Millis{0});
    if (!in) continue;
    auto* act = std::get_if<net::Activations>(&in->msg.body);
    const uint64_t rid = in->msg.header.request_id;
    try {
      if (!act) {
        throw FormatError(
            fmt::format("{} on the data inbox", net::msg_type_name(in->msg.header.type)));
      }
      const size_t n = act->n_tokens();
      if (act->dim != dim) {
        throw FormatError(fmt::format("Activations.dim {} but the model's is {}", act->dim, dim));
      }
      if (act->round >= s.assign.windows.size()) {
        throw FormatError(fmt::format("Activations.round {} but the plan has {} rounds", act->round,
                                      s.assign.windows.size()));
      }
      const auto win = s.assign.windows[act->round];
      if (win.begin == win.end || act->next_layer != win.begin || act->final) {
        throw FormatError(fmt::format(
            "Activations for layer {} in round {}, but this device's window is [{}, {})",
            act->next_layer, act->round, win.begin, win.end));
      }
      if (act->hidden.size() != n * dim) {
        throw FormatError(fmt::format("Activations.hidden: {} floats for {} rows of dim {}",
                                      act->hidden.size(), n, dim));
      }
      drain_control(net::Millis{0});
      if (stopped) return;
      try {
        check_sequences(*act, s.stage->engine(), s.assign.n_seq_max);
      } catch (const FormatError&) {
        drain_control(net::Millis{200});  // a KvControl freeing a sequence may still be on its way
        if (stopped) return;
        check_sequences(*act, s.stage->engine(), s.assign.n_seq_max);
      }
      segments.clear();
      for (const net::SeqSegment& seg : act->segments) {
        segments.push_back(model::BatchSegment{seg.seq, seg.pos0, seg.n_tokens});
      }
      if (idle_since > 0) s.stage->add_wait_ms(now_ms() - idle_since);
      // Every sequence of the step in one pass over this window's weights.
      s.stage->run_window(static_cast<int>(act->round), segments, act->hidden.data());
      const double t_send = now_ms();
      const uint32_t round = act->round;
      act->next_layer = win.end;
      if (win.end == n_layers) {
        act->final = true;
        s.head_inbox->send(*act, rid);
      } else if (last) {
        ++act->round;
        (s.wrap ? *s.wrap : *s.head_inbox).send(*act, rid);
      } else {
        (s.successor ? *s.successor : *s.head_inbox).send(*act, rid);
      }
      idle_since = now_ms();
      s.stage->add_send(idle_since - t_send);
      if (round == last_round) {
        bool decode = true;
        for (const net::SeqSegment& seg : act->segments) decode = decode && seg.n_tokens == 1;
        net::Stats st;
        st.device = s.assign.ring_position;
        st.token = rid;
        for (auto& [key, value] : residency::to_fields(s.stage->finish_step(decode))) {
          st.metrics.push_back(net::Metric{std::move(key), value});
        }
        // A head that cannot take its Stats is gone or going: its inbox link says which.
        reply(s.head, st, rid);
      }
    } catch (const NetError&) {
      throw;  // a broken ring ends the session; the head sees it too
    } catch (const UsageError& e) {
      // The batch does not fit this session's caches (positions out of step, context full):
      // the engine refused it before changing anything. An honest head checks both before
      // sending, so this comes from someone else: dropped like a malformed message.
      log::warn("worker {}: dropped a batch from {}: {}", control_->endpoint(), in->peer, e.what());
    } catch (const FormatError& e) {
      // Anyone can reach the inbox: a wrong message is dropped, not allowed to end the
      // head's generation.
      log::warn("worker {}: dropped a message from {}: {}", control_->endpoint(), in->peer,
                e.what());
    } catch (const Error& e) {
      // The computation itself failed (context full, cache out of step): the head must know.
      log::warn("worker {}: {}", control_->endpoint(), e.what());
      reply(s.head, net::ErrorMsg{fmt::format("worker {}: {}", opt_.name, e.what())}, rid);
    }
  }
}

}  // namespace hearth::cluster
