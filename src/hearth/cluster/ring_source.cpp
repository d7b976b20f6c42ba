#include "hearth/cluster/ring_source.h"

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <variant>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/cluster/endpoints.h"
#include "hearth/cluster/model_identity.h"
#include "hearth/cluster/peer_limits.h"
#include "hearth/cluster/prefetcher.h"
#include "hearth/model/hparams.h"

namespace hearth::cluster {
namespace {

std::atomic<int> g_loop_inbox{0};

bool all_loop(const std::vector<std::string>& addrs) {
  for (const auto& a : addrs) {
    if (a.rfind("loop://", 0) != 0) return false;
  }
  return true;
}

bool all_loopback_tcp(const std::vector<std::string>& addrs) {
  for (const auto& a : addrs) {
    if (!is_loopback_host(endpoint_host(a))) return false;
  }
  return true;
}

}  // namespace

RingSource::RingSource(const gguf::GgufFile& file, RingOptions options)
    : file_(file), opt_(std::move(options)) {
  const auto hp = model::load_hparams(file_);
  const int n_layers = static_cast<int>(hp.n_layers);
  const int n_devices = static_cast<int>(opt_.workers.size()) + 1;
  std::vector<int> w = opt_.plan.empty() ? even_split(n_layers, n_devices) : opt_.plan;
  if (static_cast<int>(w.size()) != n_devices) {
    throw UsageError(fmt::format("ring: plan has {} windows for {} devices (head + workers)",
                                 w.size(), n_devices));
  }
  const auto windows = ring_windows(n_layers, w);
  rounds_ = ring_rounds(n_layers, w);
  for (int m = 0; m < n_devices; ++m) {
    if (m > 0 && windows[m][0].empty()) {
      throw UsageError(
          fmt::format("ring: device {} gets no layers ({} layers, windows sum to "
                      "more); shrink the plan",
                      m, n_layers));
    }
    devices_.push_back(RingDevice{m == 0 ? "head" : opt_.workers[m - 1],
                                  m == 0 ? "head" : opt_.workers[m - 1], w[m], windows[m]});
  }

  StageOptions so;
  so.windows = windows[0];
  so.threads = opt_.threads;
  so.n_ctx = opt_.n_ctx;
  so.kv_types = opt_.kv_types;
  so.with_output = true;
  so.residency = opt_.residency;
  so.residency.prefetch = opt_.prefetch;
  stage_ = std::make_unique<Stage>(file_, so);
  totals_.resize(static_cast<size_t>(n_devices));
  if (opt_.workers.empty()) return;
  wrap_ = w[0] == 0 && opt_.workers.size() >= 2 && rounds_ > 1;

  // Token steps are numbered from a random start: the inbox takes only the hidden state of
  // the step in flight, and a stranger who can reach it must not be able to guess that number.
  step_ = std::random_device{}() * uint64_t{0x100000000} + std::random_device{}();
  // The inbox takes no message larger than a whole context of every sequence's rows.
  net::TransportOptions data = opt_.transport;
  data.max_message_bytes =
      std::min(data.max_message_bytes,
               data_message_bytes(stage_->engine().hparams().dim,
                                  static_cast<uint64_t>(stage_->engine().n_ctx()) *
                                      static_cast<uint64_t>(std::max(1, opt_.n_seq_max))));
  // The head's inbox: loopback only when every worker is local, else every interface.
  if (all_loop(opt_.workers)) {
    inbox_ = net::listen(fmt::format("loop://hearth-head-{}-{}", ::getpid(), g_loop_inbox++), data);
  } else {
    inbox_ =
        net::listen(all_loopback_tcp(opt_.workers) ? "tcp://127.0.0.1:0" : "tcp://0.0.0.0:0", data);
  }
  try {
    connect_workers(n_devices, n_layers, windows);
  } catch (...) {
    // Workers already greeted would otherwise wait for an Assign that never comes.
    stop_all("the head could not set up the ring");
    throw;
  }
}

void RingSource::connect_workers(int n_devices, int n_layers,
                                 const std::vector<std::vector<Window>>& windows) {
  const auto identity = model_identity(file_);
  const net::Millis hs{opt_.handshake_timeout_ms};
  for (size_t i = 0; i < opt_.workers.size(); ++i) {
    Peer p;
    p.address = opt_.workers[i];
    p.head_inbox =
        with_reachable_host(inbox_->endpoint(), local_address_towards(endpoint_host(p.address)));
    peers_.push_back(std::move(p));
    Peer& peer = peers_.back();
    try {
      net::TransportOptions control = opt_.transport;
      control.max_message_bytes = std::min(control.max_message_bytes, kControlMessageBytes);
      peer.control = net::connect(peer.address, control);
      net::Hello hello;
      hello.model = identity;
      hello.capabilities = net::kCapPrefetch | net::kCapBatching;
      hello.device_name = "head";
      hello.data_endpoint = peer.head_inbox;
      peer.control->send(hello);
      const auto env = peer.control->recv(hs, "HelloAck");
      if (const auto* r = std::get_if<net::Refuse>(&env.body)) {
        throw NetError(fmt::format("refused: {}", r->reason));
      }
      const auto* ack = std::get_if<net::HelloAck>(&env.body);
      peer.greeted = ack != nullptr;
      if (!ack) {
        throw NetError(fmt::format("answered Hello with {}", net::msg_type_name(env.header.type)));
      }
      if (ack->model != identity) {
        throw UsageError(fmt::format(
            "worker {} runs a different model ({}) than the head ({}: {}); every device needs "
            "the same file",
            peer.address, describe(ack->model), file_.path(), describe(identity)));
      }
      peer.data_endpoint = with_reachable_host(ack->data_endpoint, endpoint_host(peer.address));
      check_peer_endpoint("HelloAck.data_endpoint", peer.data_endpoint, peer.address);
      devices_[i + 1].name = ack->device_name.empty() ? peer.address : ack->device_name;
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      throw NetError(fmt::format("worker {} (device {}): {}", peer.address, i + 1, e.what()));
    }
  }
  for (size_t i = 0; i < peers_.size(); ++i) {
    const int m = static_cast<int>(i) + 1;
    net::Assign a;
    a.ring_position = static_cast<uint32_t>(m);
    a.n_devices = static_cast<uint32_t>(n_devices);
    a.n_layers = static_cast<uint32_t>(n_layers);
    for (const auto& win : windows[m]) {
      a.windows.push_back(
          net::LayerRange{static_cast<uint32_t>(win.begin), static_cast<uint32_t>(win.end)});
    }
    a.successor_endpoint =
        i + 1 < peers_.size() ? peers_[i + 1].data_endpoint : peers_[i].head_inbox;
    if (wrap_ && i + 1 == peers_.size()) a.wrap_endpoint = peers_[0].data_endpoint;
    a.prefetch = opt_.prefetch;
    a.n_ctx = static_cast<uint32_t>(engine().n_ctx());
    a.n_threads = 0;
    a.n_seq_max = static_cast<uint32_t>(std::max(1, opt_.n_seq_max));
    a.kv_type_k = static_cast<uint8_t>(opt_.kv_types.k);
    a.kv_type_v = static_cast<uint8_t>(opt_.kv_types.v);
    try {
      peers_[i].control->send(a);
    } catch (const Error& e) {
      fail_peer(i, fmt::format("sending Assign: {}", e.what()));
    }
  }
  for (size_t i = 0; i < peers_.size(); ++i) {
    try {
      const auto env = peers_[i].control->recv(net::Millis{opt_.step_timeout_ms}, "Ready");
      if (const auto* e = std::get_if<net::ErrorMsg>(&env.body)) throw NetError(e->text);
      if (!std::holds_alternative<net::Ready>(env.body)) {
        throw NetError(fmt::format("answered Assign with {}", net::msg_type_name(env.header.type)));
      }
    } catch (const Error& e) {
      fail_peer(i, e.what());
    }
  }
  successor_ = net::connect(peers_[0].data_endpoint, opt_.transport);
}

RingSource::~RingSource() {
  stop_all("head finished");
}

void RingSource::stop_all(const std::string& reason) noexcept {
  for (auto& p : peers_) {
    // Never reached, or gone: a send would only wait for its timeout.
    if (!p.control || !p.greeted || p.control->peer_lost()) continue;
    try {
      p.control->send(net::Stop{reason});
    } catch (const std::exception&) {
      // A worker that is already gone needs no goodbye.
    }
  }
}

void RingSource::fail_peer(size_t i, const std::string& what) {
  // Which links are gone, whoever reported the failure (a worker whose successor died reports
  // its own failed send): what a recovery must leave out. That worker may hear of the death
  // before the head's own link to the dead device does, so give the head's links a moment
  // to show it before deciding that no device was lost.
  constexpr double kLostGraceMs = 500;
  const double until = now_ms() + kLostGraceMs;
  for (;;) {
    lost_.clear();
    for (size_t j = 0; j < peers_.size(); ++j) {
      if (peers_[j].control && peers_[j].control->peer_lost()) lost_.push_back(j);
    }
    if (!lost_.empty() || now_ms() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw NetError(fmt::format("worker {} (device {}): {}", peers_[i].address, i + 1, what));
}

void RingSource::absorb_stats(size_t peer, const net::Stats& st) {
  std::vector<std::pair<std::string, double>> fields;
  for (const auto& m : st.metrics) fields.emplace_back(m.key, m.value);
  totals_[peer + 1].add(residency::from_fields(fields));
}

std::vector<residency::DeviceTotals> RingSource::device_stats() {
  for (size_t i = 0; i < peers_.size(); ++i) {
    const uint64_t nonce = 0x5354415453ull + i;  // "STATS"
    try {
      peers_[i].control->send(net::Ping{nonce, 0});
      for (;;) {
        const auto env = peers_[i].control->recv(net::Millis{opt_.handshake_timeout_ms}, "Pong");
        if (const auto* st = std::get_if<net::Stats>(&env.body)) absorb_stats(i, *st);
        const auto* pong = std::get_if<net::Pong>(&env.body);
        if (pong && pong->nonce == nonce) break;
      }
    } catch (const Error& e) {
      // Metrics are a report, not the job: a worker that cannot answer keeps what came in.
      log::warn("ring head: no stats from worker {}: {}", peers_[i].address, e.what());
    }
  }
  auto out = totals_;
  out[0] = stage_->totals();
  return out;
}

int64_t RingSource::vocab() const {
  return stage_->engine().hparams().vocab;
}
int64_t RingSource::n_ctx() const {
  return stage_->engine().n_ctx();
}
int64_t RingSource::seq_length(int64_t seq) const {
  const auto it = seq_len_.find(seq);
  return it == seq_len_.end() ? 0 : it->second;
}

void RingSource::send_kv(const net::KvCommand& c) {
  for (size_t i = 0; i < peers_.size(); ++i) {
    try {
      peers_[i].control->send(net::KvControl{{c}});
    } catch (const Error& e) {
      fail_peer(i, e.what());
    }
  }
}

void RingSource::truncate(int64_t seq, int64_t n_pos) {
  stage_->engine().truncate(seq, n_pos);
  if (auto it = seq_len_.find(seq); it != seq_len_.end()) it->second = std::min(it->second, n_pos);
  send_kv(net::KvCommand{net::KvOp::kRemove, static_cast<uint32_t>(seq),
                         static_cast<uint32_t>(n_pos), UINT32_MAX});
}

void RingSource::drop(int64_t seq) {
  stage_->engine().drop(seq);
  seq_len_.erase(seq);
  send_kv(net::KvCommand{net::KvOp::kClear, static_cast<uint32_t>(seq), 0, 0});
}

std::optional<std::pair<uint64_t, net::Activations>> RingSource::poll_hidden(uint64_t lo,
                                                                             uint64_t hi,
                                                                             double deadline_ms) {
  std::vector<net::Receiver*> rs{inbox_.get()};
  for (auto& p : peers_) rs.push_back(p.control.get());
  for (;;) {
    const double left = std::max(0.0, deadline_ms - now_ms());
    const size_t which =
        net::wait_any(rs, net::Millis{std::min<int64_t>(250, static_cast<int64_t>(left))});
    // Check every worker each time: a dead one is named even while others are still busy.
    for (size_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i].control->peer_lost()) fail_peer(i, "connection lost (worker died or stalled)");
    }
    if (which == 0) {
      auto in = inbox_->recv_for(net::Millis{0});
      if (in) {
        auto* act = std::get_if<net::Activations>(&in->msg.body);
        const uint64_t rid = in->msg.header.request_id;
        if (act && rid >= lo && rid < hi) return std::make_pair(rid, std::move(*act));
        log::warn("ring head: dropped a stale or unexpected {} from {}",
                  net::msg_type_name(in->msg.header.type), in->peer);
      }
    } else if (which >= 1 && which < rs.size()) {
      const size_t i = which - 1;
      std::optional<net::Envelope> env;
      try {
        env = peers_[i].control->recv_for(net::Millis{0});
      } catch (const Error& e) {
        fail_peer(i, e.what());
      }
      if (env) {
        if (const auto* e = std::get_if<net::ErrorMsg>(&env->body)) fail_peer(i, e->text);
        if (const auto* st = std::get_if<net::Stats>(&env->body)) absorb_stats(i, *st);
      }
    } else if (now_ms() >= deadline_ms) {
      return std::nullopt;
    }
  }
}

net::Activations RingSource::wait_hidden(uint64_t step, const std::string& waiting_for) {
  auto got = poll_hidden(step, step + 1, now_ms() + opt_.step_timeout_ms);
  if (!got) {
    throw NetError(fmt::format("ring: no hidden state came back within {} ms (waiting for {})",
                               opt_.step_timeout_ms, waiting_for));
  }
  return std::move(got->second);
}

void RingSource::send_round(int r, const std::vector<net::SeqSegment>& segments,
                            std::vector<float> hidden, uint64_t step) {
  net::Activations a;
  a.round = static_cast<uint32_t>(r);
  a.next_layer = static_cast<uint32_t>(devices_[0].windows[r].end);
  a.dim = stage_->engine().hparams().dim;
  a.segments = segments;
  a.hidden = std::move(hidden);
  const double t_send = now_ms();
  try {
    successor_->send(a, step);
  } catch (const Error& e) {
    fail_peer(0, e.what());
  }
  stage_->add_send(now_ms() - t_send);
}

void RingSource::eval_pipelined(const model::EvalItem& item) {
  model::Engine& engine = stage_->engine();
  const int64_t dim = engine.hparams().dim;
  const int n_layers = static_cast<int>(engine.hparams().n_layers);
  const auto n = static_cast<int64_t>(item.tokens.size());
  const int64_t pos0 = seq_length(item.seq);
  const int64_t chunk = chunk_for(n);
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  // Every chunk's rows, embedded at once; each chunk's buffer travels and comes back.
  std::vector<std::vector<float>> hidden(static_cast<size_t>(n_chunks));
  std::vector<std::vector<net::SeqSegment>> wire(static_cast<size_t>(n_chunks));
  std::vector<model::BatchSegment> seg(static_cast<size_t>(n_chunks));
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t begin = c * chunk, rows = std::min(chunk, n - begin);
    hidden[c].resize(static_cast<size_t>(rows * dim));
    engine.embed(item.tokens.subspan(static_cast<size_t>(begin), static_cast<size_t>(rows)),
                 hidden[c].data());
    seg[c] = model::BatchSegment{item.seq, pos0 + begin, rows};
    wire[c] = {net::SeqSegment{static_cast<uint32_t>(item.seq), static_cast<uint32_t>(pos0 + begin),
                               static_cast<uint32_t>(rows)}};
  }
  const uint64_t first = step_ + 1;
  step_ += static_cast<uint64_t>(n_chunks);
  // The head's window of round r over chunk c; true when that ends the model (final).
  const auto run_head = [&](int64_t c, int r) {
    stage_->run_window(r, std::span<const model::BatchSegment>(&seg[c], 1), hidden[c].data());
    return devices_[0].windows[r].end == n_layers;
  };
  // Each device takes chunks in order in each of its windows, so chunks follow each other
  // around the ring: what comes back (deeper in the model) is served first, and a new chunk
  // enters whenever the head has nothing else to do.
  int64_t next_new = 0, finished = 0;
  // Chunks sent and not yet back: only those may come back (a duplicate or stray reply from a
  // peer is refused rather than counted).
  std::vector<char> in_flight(static_cast<size_t>(n_chunks), 0);
  const auto send = [&](int64_t c, int r, uint64_t step) {
    in_flight[c] = 1;
    send_round(r, wire[c], std::move(hidden[c]), step);
  };
  while (finished < n_chunks) {
    // Serially, a chunk enters only when the one before has come back.
    const bool can_start = next_new < n_chunks && (opt_.prefill_pipelined || finished == next_new);
    const double t_wait = now_ms();
    // A ring of one only runs its chunks in turn (nothing comes back to wait for).
    std::optional<std::pair<uint64_t, net::Activations>> back;
    if (!peers_.empty()) {
      back = poll_hidden(first, first + static_cast<uint64_t>(n_chunks),
                         can_start ? t_wait : t_wait + opt_.step_timeout_ms);
    }
    if (back) {
      if (!can_start) stage_->add_wait_ms(now_ms() - t_wait);
      const auto c = static_cast<int64_t>(back->first - first);
      net::Activations& a = back->second;
      if (!in_flight[c]) {
        throw NetError(fmt::format("ring: prefill chunk {} came back while not in flight", c));
      }
      in_flight[c] = 0;
      const bool next_round =
          !wrap_ && a.round >= 1 && a.round < static_cast<uint32_t>(rounds_) &&
          a.next_layer == static_cast<uint32_t>(devices_[0].windows[a.round].begin);
      if (a.dim != dim || a.segments != wire[c] || !(a.final || next_round)) {
        throw NetError(fmt::format(
            "ring: prefill chunk {} came back for round {} layer {} ({} tokens), expected "
            "{} tokens for the final layer or the head's next window",
            c, a.round, a.next_layer, a.n_tokens(), seg[c].n_tokens));
      }
      hidden[c] = std::move(a.hidden);
      if (a.final || run_head(c, static_cast<int>(a.round))) {
        ++finished;
      } else {
        send(c, static_cast<int>(a.round), back->first);
      }
      continue;
    }
    if (!can_start) {
      throw NetError(fmt::format(
          "ring: no hidden state came back within {} ms (prefill, {} of {} chunks done)",
          opt_.step_timeout_ms, finished, n_chunks));
    }
    const int64_t c = next_new++;
    if (run_head(c, 0)) {
      ++finished;  // the head holds the whole model
    } else {
      send(c, 0, first + static_cast<uint64_t>(c));
    }
  }
  // Logits: of the last row, or of every row.
  if (item.logits != nullptr) {
    if (item.all_logits) {
      std::vector<float> all;
      all.reserve(static_cast<size_t>(n * dim));
      for (auto& h : hidden) all.insert(all.end(), h.begin(), h.end());
      stage_->logits(std::span<const model::EvalItem>(&item, 1), all.data());
    } else {
      model::EvalItem last = item;
      last.tokens = item.tokens.subspan(static_cast<size_t>(n - 1));
      stage_->logits(std::span<const model::EvalItem>(&last, 1),
                     hidden.back().data() + (seg.back().n_tokens - 1) * dim);
    }
  }
  seq_len_[item.seq] += n;
  stage_->finish_step(/*decode=*/false);
}

int64_t RingSource::chunk_for(int64_t n) const {
  int64_t c = opt_.prefill_chunk;
  if (c == kAutoChunk) {
    if (opt_.prefill_model) {
      c = opt_.prefill_model->best_chunk(n);
    } else {
      c = peers_.empty() ? 0 : kDefaultChunk;
    }
  }
  return c <= 0 || c >= n ? n : c;
}

void RingSource::eval_batch(std::span<const model::EvalItem> items) {
  model::Engine& engine = stage_->engine();
  if (items.size() == 1 && chunk_for(static_cast<int64_t>(items[0].tokens.size())) <
                               static_cast<int64_t>(items[0].tokens.size())) {
    const model::EvalItem& it = items[0];
    const int64_t end = seq_length(it.seq) + static_cast<int64_t>(it.tokens.size());
    if (end > engine.n_ctx()) {
      throw UsageError(
          fmt::format("context full: {} positions do not fit in the context of {} (use -c)", end,
                      engine.n_ctx()));
    }
    if (it.seq < 0 || it.seq > UINT32_MAX || end > UINT32_MAX) {
      throw UsageError(
          fmt::format("ring: sequence {} at position {} does not fit the wire's u32", it.seq, end));
    }
    return eval_pipelined(it);
  }
  const uint32_t dim = engine.hparams().dim;
  const int n_layers = static_cast<int>(engine.hparams().n_layers);
  std::vector<model::BatchSegment> segments;   // (n_items) head's view of the batch
  std::vector<net::SeqSegment> wire_segments;  // (n_items) the same on the wire
  for (const model::EvalItem& it : items) {
    const int64_t pos0 = seq_length(it.seq);
    if (pos0 + static_cast<int64_t>(it.tokens.size()) > engine.n_ctx()) {
      throw UsageError(
          fmt::format("context full: {} positions do not fit in the context of {} (use -c)",
                      pos0 + static_cast<int64_t>(it.tokens.size()), engine.n_ctx()));
    }
    const auto n_tok = static_cast<int64_t>(it.tokens.size());
    if (it.seq < 0 || it.seq > UINT32_MAX || pos0 + n_tok > UINT32_MAX) {
      throw UsageError(fmt::format("ring: sequence {} at position {} does not fit the wire's u32",
                                   it.seq, pos0 + n_tok));
    }
    segments.push_back(model::BatchSegment{it.seq, pos0, n_tok});
    wire_segments.push_back(net::SeqSegment{
        static_cast<uint32_t>(it.seq), static_cast<uint32_t>(pos0), static_cast<uint32_t>(n_tok)});
  }
  const int64_t n = model::batch_rows(segments);
  hidden_.resize(static_cast<size_t>(n) * dim);  // (n, dim)
  int64_t row = 0;
  for (const model::EvalItem& it : items) {
    engine.embed(it.tokens, hidden_.data() + row * dim);
    row += static_cast<int64_t>(it.tokens.size());
  }
  const uint64_t step = ++step_;
  for (int r = 0; r < rounds_; ++r) {
    const Window win = devices_[0].windows[r];
    stage_->run_window(r, segments, hidden_.data());
    if (win.end == n_layers) break;  // the head ran the last layer itself
    send_round(r, wire_segments, std::move(hidden_), step);
    const double t_wait = now_ms();
    auto back = wait_hidden(step, wrap_ ? fmt::format("token step {} ({} rounds)", step, rounds_)
                                        : fmt::format("round {} of token step {}", r, step));
    stage_->add_wait_ms(now_ms() - t_wait);
    const bool done = back.final;
    // Without wrap the head continues the next round; with it only the last layer comes back.
    const bool next_round =
        !wrap_ && back.round == static_cast<uint32_t>(r + 1) && r + 1 < rounds_ &&
        back.next_layer == static_cast<uint32_t>(devices_[0].windows[r + 1].begin);
    if (back.dim != dim || back.segments != wire_segments || !(done || next_round)) {
      throw NetError(
          fmt::format("ring: hidden state came back for round {} layer {} ({} tokens in {} "
                      "sequences), expected {} with {} tokens in {} sequences",
                      back.round, back.next_layer, back.n_tokens(), back.segments.size(),
                      wrap_ ? std::string("the final layer") : fmt::format("round {}", r + 1), n,
                      wire_segments.size()));
    }
    hidden_ = std::move(back.hidden);
    if (done) break;
  }
  stage_->logits(items, hidden_.data());
  bool decode = true;
  for (const model::EvalItem& it : items) {
    seq_len_[it.seq] += static_cast<int64_t>(it.tokens.size());
    decode = decode && it.tokens.size() == 1;
  }
  stage_->finish_step(decode);
}

}  // namespace hearth::cluster
