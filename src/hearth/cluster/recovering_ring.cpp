#include "hearth/cluster/recovering_ring.h"

#include <fmt/core.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"

namespace hearth::cluster {
namespace {

// How long a new ring may take to form: the workers left may still be in the old session
// (a send to the lost device blocks up to the transport's send timeout before it ends), and
// they refuse a new head until then.
constexpr double kRebuildDeadlineMs = 30000;
constexpr int kRebuildRetryMs = 500;

}  // namespace

std::vector<int> plan_without(const std::vector<int>& plan, const std::vector<size_t>& lost) {
  if (plan.empty()) return {};
  std::vector<bool> gone(plan.size(), false);
  for (size_t i : lost) {
    if (i + 1 >= plan.size()) throw UsageError(fmt::format("plan_without: no worker {}", i));
    gone[i + 1] = true;  // plan[0] is the head
  }
  int freed = 0, kept = 0;
  std::vector<int> out;
  for (size_t m = 0; m < plan.size(); ++m) {
    if (gone[m]) {
      freed += plan[m];
    } else {
      out.push_back(plan[m]);
      kept += plan[m];
    }
  }
  if (kept == 0) {  // nothing left holds layers: the head takes them all
    out[0] = freed;
    return out;
  }
  // Shares of `freed` in proportion to each device's window, floors first, then the largest
  // remainders (earlier device on ties).
  std::vector<int64_t> rem(out.size());
  int given = 0;
  for (size_t m = 0; m < out.size(); ++m) {
    const int64_t num = static_cast<int64_t>(freed) * out[m];
    rem[m] = num % kept;
    const int share = static_cast<int>(num / kept);
    out[m] += share;
    given += share;
  }
  std::vector<size_t> order(out.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  for (size_t j = 0; given < freed; ++j, ++given) ++out[order[j % order.size()]];
  return out;
}

RecoveringRing::RecoveringRing(const gguf::GgufFile& file, RingOptions options, Replan replan,
                               int max_recoveries, std::vector<std::string> planned_over)
    : file_(file),
      options_(std::move(options)),
      replan_(std::move(replan)),
      max_recoveries_(max_recoveries),
      known_(planned_over.empty() ? options_.workers : std::move(planned_over)),
      planned_over_(known_),
      ring_(std::make_unique<RingSource>(file_, options_)),
      vocab_(ring_->vocab()),
      n_ctx_(ring_->n_ctx()) {}

RecoveringRing::~RecoveringRing() = default;

Replan proportional_replan(RingOptions original) {
  return [original = std::move(original)](const std::vector<std::string>& workers) {
    RingOptions next = original;
    next.workers = workers;
    if (original.plan.empty()) return next;  // an even split over whoever is there
    for (const auto& w : workers) {
      if (std::find(original.workers.begin(), original.workers.end(), w) ==
          original.workers.end()) {
        throw UsageError(fmt::format(
            "ring: {} cannot join a ring with a manual --plan (use --plan even or auto)", w));
      }
    }
    std::vector<size_t> lost;
    for (size_t i = 0; i < original.workers.size(); ++i) {
      if (std::find(workers.begin(), workers.end(), original.workers[i]) == workers.end())
        lost.push_back(i);
    }
    next.plan = plan_without(original.plan, lost);
    return next;
  };
}

void RecoveringRing::eval_batch(std::span<const model::EvalItem> items) {
  with_recovery([&] { ring_->eval_batch(items); });
  for (const model::EvalItem& it : items) {
    auto& h = history_[it.seq];
    h.insert(h.end(), it.tokens.begin(), it.tokens.end());
  }
}

int64_t RecoveringRing::seq_length(int64_t seq) const {
  const auto it = history_.find(seq);
  return it == history_.end() ? 0 : static_cast<int64_t>(it->second.size());
}

void RecoveringRing::truncate(int64_t seq, int64_t n_pos) {
  if (auto it = history_.find(seq);
      it != history_.end() && n_pos >= 0 && static_cast<size_t>(n_pos) < it->second.size()) {
    it->second.resize(static_cast<size_t>(n_pos));
  }
  with_recovery([&] { ring_->truncate(seq, n_pos); });
}

void RecoveringRing::drop(int64_t seq) {
  history_.erase(seq);
  with_recovery([&] { ring_->drop(seq); });
}

template <typename Step>
void RecoveringRing::with_recovery(Step step) {
  for (;;) {
    const double t0 = now_ms();
    try {
      if (!ring_) throw NetError("ring: no ring to run on (it could not be re-formed)");
      if (replay_pending_) replay();
      step();
      return;
    } catch (const NetError& e) {
      const std::vector<size_t> lost = ring_->lost_workers();
      if (lost.empty() || static_cast<int>(recoveries_.size()) >= max_recoveries_) throw;
      log::warn("ring head: {}; recovering without {} device(s)", e.what(), lost.size());
      recover(lost, now_ms() - t0);
    }
  }
}

void RecoveringRing::recover(const std::vector<size_t>& lost, double detect_ms) {
  Recovery rec;
  rec.detect_ms = detect_ms;
  for (size_t i : lost) rec.lost.push_back(options_.workers.at(i));
  std::vector<std::string> planned;
  for (const auto& a : planned_over_) {
    if (std::find(rec.lost.begin(), rec.lost.end(), a) == rec.lost.end()) planned.push_back(a);
  }
  const double t_replan = now_ms();
  options_ = replan_(planned);
  planned_over_ = std::move(planned);
  rec.replan_ms = now_ms() - t_replan;
  std::string names;
  for (const auto& a : rec.lost) names += (names.empty() ? "" : ", ") + a;
  const double t_rebuild = now_ms();
  form_ring("without " + names);
  rec.rebuild_ms = now_ms() - t_rebuild;
  rec.devices_left = static_cast<int>(ring_->devices().size());
  for (const auto& d : ring_->devices()) rec.plan.push_back(d.w);
  recoveries_.push_back(std::move(rec));
  replay_pending_ = true;
  replay_record_ = recoveries_.size() - 1;
}

void RecoveringRing::form_ring(const std::string& why) {
  ring_.reset();  // Stop to the workers left, so they can take the new head's Hello
  const double deadline = now_ms() + kRebuildDeadlineMs;
  for (;;) {
    try {
      ring_ = std::make_unique<RingSource>(file_, options_);
      return;
    } catch (const NetError& e) {
      if (now_ms() >= deadline) {
        throw NetError(fmt::format("ring: could not re-form {}: {}", why, e.what()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kRebuildRetryMs));
    }
  }
}

namespace {

// A short probe: a worker back and idle answers Ping at once; one still gone must not hold
// the server for a send timeout.
bool answers_ping(const std::string& addr, net::TransportOptions t, uint64_t nonce) {
  try {
    t.send_timeout_ms = 300;
    auto c = net::connect(addr, t);
    c->send(net::Ping{nonce, 0});
    const double until = now_ms() + 500;
    while (now_ms() < until) {
      auto env = c->recv_for(net::Millis{50});
      const auto* pong = env ? std::get_if<net::Pong>(&env->body) : nullptr;
      if (pong != nullptr && pong->nonce == nonce) return true;
    }
  } catch (const Error&) {
  }
  return false;
}

}  // namespace

bool RecoveringRing::try_rejoin() {
  if (candidates_) {
    for (auto& a : candidates_()) {
      if (std::find(known_.begin(), known_.end(), a) == known_.end()) known_.push_back(a);
    }
  }
  std::vector<std::string> back;
  uint64_t nonce = 0x4a4f494e00ull;  // "JOIN"
  for (const auto& addr : known_) {
    if (std::find(planned_over_.begin(), planned_over_.end(), addr) != planned_over_.end())
      continue;
    if (answers_ping(addr, options_.transport, ++nonce)) back.push_back(addr);
  }
  if (back.empty()) return false;
  std::string names;
  for (const auto& a : back) names += (names.empty() ? "" : ", ") + a;
  std::vector<std::string> planned;  // ring order: the order the devices became known
  for (const auto& a : known_) {
    if (std::find(planned_over_.begin(), planned_over_.end(), a) != planned_over_.end() ||
        std::find(back.begin(), back.end(), a) != back.end()) {
      planned.push_back(a);
    }
  }
  const RingOptions before = options_;
  try {
    options_ = replan_(planned);
    planned_over_ = std::move(planned);
    form_ring("with " + names);
  } catch (const Error& e) {
    // A device that answers but cannot be planned for or set up stays out until it is lost
    // and found again; the ring goes on as it was.
    log::warn("ring head: {} answered but could not join ({}); going on without", names, e.what());
    options_ = before;
    for (const auto& a : back) planned_over_.push_back(a);  // not probed again
    form_ring("as it was before " + names + " answered");
    replay_pending_ = true;
    replay_record_.reset();
    return true;
  }
  replay_pending_ = true;
  replay_record_.reset();
  ++rejoins_;
  log::info("ring head: {} joined; ring of {} devices", names, ring_->devices().size());
  return true;
}

// The new devices hold no KV cache: evaluate each sequence's tokens again (their logits are
// not needed; the failed step then runs as it would have). A loss during the replay is
// recovered from like any other, and the replay starts over.
void RecoveringRing::replay() {
  if (!ring_) throw NetError("ring: no ring to run on (it could not be re-formed)");
  const double t0 = now_ms();
  std::vector<float> scratch(static_cast<size_t>(ring_->vocab()));
  int64_t n = 0;
  for (const auto& [seq, tokens] : history_) {
    if (tokens.empty()) continue;
    ring_->eval(seq, tokens, scratch.data());
    n += static_cast<int64_t>(tokens.size());
  }
  replay_pending_ = false;
  if (!replay_record_) return;  // a rejoin, not a recovery
  Recovery& rec = recoveries_[*replay_record_];
  replay_record_.reset();
  rec.replayed_tokens = n;
  rec.replay_ms = now_ms() - t0;
  log::warn(
      "ring head: recovered on {} devices: detection {:.0f} ms, new ring {:.0f} ms, {} tokens "
      "re-evaluated in {:.0f} ms",
      rec.devices_left, rec.detect_ms, rec.rebuild_ms, rec.replayed_tokens, rec.replay_ms);
}

}  // namespace hearth::cluster
