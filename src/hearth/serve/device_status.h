// What the server reports of the devices that compute its tokens: memory pressure, and for a
// ring its recoveries. The scheduler thread is the only caller, so implementations need no
// locking, except for ring_state(), which any thread may call.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "hearth/cluster/recovering_ring.h"
#include "hearth/residency/memory_status.h"
#include "hearth/serve/metrics.h"

namespace hearth::serve {

// The ring behind the server, for /health and /metrics: devices now and at start, and the
// recoveries from lost workers so far.
struct RingState {
  bool ring = false;  // false: a single device
  int devices = 1;
  int devices_at_start = 1;
  int recoveries = 0;
  int rejoins = 0;
  std::vector<std::string> lost;  // control addresses of the workers out of the ring now
};

// What the server shows of the devices behind its logits source (head/logits_source.h: the
// engine, or the ring that cluster::RecoveringRing re-forms without lost workers).
class DeviceStatus {
 public:
  virtual ~DeviceStatus() = default;
  // Memory pressure per device (ring order; one entry for a single device). May talk to
  // the workers, so only the scheduler thread calls it, between steps.
  virtual std::vector<DevicePressure> device_pressure() = 0;
  virtual RingState ring_state() const { return {}; }  // any thread
  // The scheduler thread calls it after each round of calls into the source, which may have
  // re-formed the ring.
  virtual void after_step() {}
  // Called by the scheduler when no sequence is active, every few seconds: a ring lets lost
  // workers that are back rejoin.
  virtual void idle() {}
};

// One device: its memory pressure against the baseline taken at construction.
class LocalStatus : public DeviceStatus {
 public:
  // Takes the memory baseline now: construct it before the weights are read in.
  LocalStatus() : base_(residency::read_memory_status()) {}
  std::vector<DevicePressure> device_pressure() override;

 private:
  residency::MemoryStatus base_;
  double pressure_max_ = 0;
  uint64_t samples_ = 0;
};

// A ring that re-forms without lost workers (cluster::RecoveringRing): its devices' pressure
// from their step statistics, and the recoveries and rejoins so far.
class RingStatus : public DeviceStatus {
 public:
  explicit RingStatus(cluster::RecoveringRing& ring);
  std::vector<DevicePressure> device_pressure() override;
  RingState ring_state() const override;
  void after_step() override { note_recoveries(); }
  void idle() override;

 private:
  void note_recoveries();

  cluster::RecoveringRing& ring_;
  size_t seen_recoveries_ = 0;
  int seen_rejoins_ = 0;
  std::vector<residency::DeviceTotals> last_;      // (n_devices) totals at the previous sample
  std::vector<double> recent_;                     // (n_devices) last reported recent pressure
  std::vector<residency::StepStats> recent_step_;  // (n_devices) last means per step
  mutable std::mutex state_mu_;
  RingState state_;  // guarded by state_mu_
};

}  // namespace hearth::serve
