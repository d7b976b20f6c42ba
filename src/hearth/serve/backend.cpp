#include "hearth/serve/backend.h"

#include <algorithm>

#include "hearth/base/log.h"

namespace hearth::serve {

std::vector<DevicePressure> LocalBackend::device_pressure() {
  const double p = residency::memory_pressure(base_, residency::read_memory_status());
  pressure_max_ = std::max(pressure_max_, p);
  ++samples_;
  return {DevicePressure{"local", p, pressure_max_, samples_}};
}

RingBackend::RingBackend(cluster::RecoveringRing& ring) : ring_(ring) {
  state_.ring = true;
  state_.devices = state_.devices_at_start = static_cast<int>(ring_.ring().devices().size());
}

template <typename Step>
void RingBackend::tracked(Step step) {
  try {
    step();
  } catch (...) {
    note_recoveries();
    throw;
  }
  note_recoveries();
}

void RingBackend::eval(int64_t seq, std::span<const int32_t> tokens, float* logits) {
  tracked([&] { ring_.eval(seq, tokens, logits); });
}

void RingBackend::eval_batch(std::span<const model::EvalItem> items) {
  tracked([&] { ring_.eval_batch(items); });
}

void RingBackend::drop(int64_t seq) {
  tracked([&] { ring_.drop(seq); });
}

void RingBackend::idle() {
  try {
    ring_.try_rejoin();
  } catch (const std::exception& e) {
    log::warn("serve: rejoining lost workers: {}", e.what());
  }
  note_recoveries();
}

void RingBackend::note_recoveries() {
  const auto& recs = ring_.recoveries();
  if (recs.size() == seen_recoveries_ && ring_.rejoins() == seen_rejoins_) return;
  seen_recoveries_ = recs.size();
  seen_rejoins_ = ring_.rejoins();
  last_.clear();  // another ring: its devices count their steps from zero
  recent_.clear();
  std::lock_guard lock(state_mu_);
  state_.devices = static_cast<int>(ring_.ring().devices().size());
  state_.recoveries = static_cast<int>(recs.size());
  state_.rejoins = ring_.rejoins();
  // Lost: the workers of the first ring that are not in the ring now.
  state_.lost.clear();
  for (const auto& r : recs) {
    for (const auto& a : r.lost) {
      const auto& devs = ring_.ring().devices();
      const bool in_ring = std::any_of(
          devs.begin(), devs.end(), [&](const cluster::RingDevice& d) { return d.address == a; });
      if (!in_ring && std::find(state_.lost.begin(), state_.lost.end(), a) == state_.lost.end()) {
        state_.lost.push_back(a);
      }
    }
  }
}

RingState RingBackend::ring_state() const {
  std::lock_guard lock(state_mu_);
  return state_;
}

std::vector<DevicePressure> RingBackend::device_pressure() {
  const auto totals = ring_.ring().device_stats();
  const auto& devices = ring_.ring().devices();
  last_.resize(totals.size());
  recent_.resize(totals.size(), 0.0);
  std::vector<DevicePressure> out;
  for (size_t d = 0; d < totals.size(); ++d) {
    const auto& t = totals[d];
    // Mean over the steps since the previous sample; without new steps, the last figure.
    if (t.steps > last_[d].steps) {
      recent_[d] =
          (t.sum.pressure - last_[d].sum.pressure) / static_cast<double>(t.steps - last_[d].steps);
    }
    last_[d] = t;
    out.push_back(DevicePressure{d < devices.size() ? devices[d].name : std::to_string(d),
                                 recent_[d], t.pressure_max, t.steps});
  }
  return out;
}

}  // namespace hearth::serve
