#include "hearth/serve/device_status.h"

#include <algorithm>

#include "hearth/base/log.h"

namespace hearth::serve {

std::vector<DevicePressure> LocalStatus::device_pressure() {
  const double p = residency::memory_pressure(base_, residency::read_memory_status());
  pressure_max_ = std::max(pressure_max_, p);
  ++samples_;
  DevicePressure d;
  d.name = "local";
  d.pressure = p;
  d.pressure_max = pressure_max_;
  d.steps = samples_;
  return {d};
}

RingStatus::RingStatus(cluster::RecoveringRing& ring) : ring_(ring) {
  state_.ring = true;
  state_.devices = state_.devices_at_start = static_cast<int>(ring_.ring().devices().size());
}

void RingStatus::idle() {
  try {
    ring_.try_rejoin();
  } catch (const std::exception& e) {
    log::warn("serve: rejoining lost workers: {}", e.what());
  }
  note_recoveries();
}

void RingStatus::note_recoveries() {
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

RingState RingStatus::ring_state() const {
  std::lock_guard lock(state_mu_);
  return state_;
}

std::vector<DevicePressure> RingStatus::device_pressure() {
  const auto totals = ring_.ring().device_stats();
  const auto& devices = ring_.ring().devices();
  last_.resize(totals.size());
  recent_.resize(totals.size(), 0.0);
  recent_step_.resize(totals.size());
  std::vector<DevicePressure> out;
  for (size_t d = 0; d < totals.size(); ++d) {
    const auto& t = totals[d];
    // Mean over the steps since the previous sample; without new steps, the last figure.
    if (t.steps > last_[d].steps) {
      recent_[d] =
          (t.sum.pressure - last_[d].sum.pressure) / static_cast<double>(t.steps - last_[d].steps);
    }
    DevicePressure p;
    p.name = d < devices.size() ? devices[d].name : std::to_string(d);
    p.pressure = recent_[d];
    p.pressure_max = t.pressure_max;
    p.steps = t.steps;
    if (t.steps > last_[d].steps) {
      const double n = static_cast<double>(t.steps - last_[d].steps);
      recent_step_[d] = t.sum;
      for (auto f : {&residency::StepStats::compute_ms, &residency::StepStats::wait_ms,
                     &residency::StepStats::disk_bytes, &residency::StepStats::reload_bytes}) {
        recent_step_[d].*f = (t.sum.*f - last_[d].sum.*f) / n;
      }
    }
    p.compute_ms = recent_step_[d].compute_ms;
    p.wait_ms = recent_step_[d].wait_ms;
    p.disk_bytes = recent_step_[d].disk_bytes;
    p.reload_bytes = recent_step_[d].reload_bytes;
    if (d < devices.size()) {
      p.address = devices[d].address;
      for (const auto& w : devices[d].windows) p.windows.emplace_back(w.begin, w.end);
    }
    last_[d] = t;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace hearth::serve
