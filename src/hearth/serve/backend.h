// Where the server's tokens are computed: one local engine or the head of a ring. The
// scheduler thread is the only caller, so implementations need no locking, except for
// ring_state(), which any thread may call.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "hearth/cluster/recovering_ring.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/model/engine.h"
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

class Backend {
 public:
  virtual ~Backend() = default;
  // Appends `tokens` to sequence `seq` (its own KV cache) and writes the logits of the last
  // one: (vocab) f32.
  virtual void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) = 0;
  // Several sequences in one forward pass (one trip around the ring): each item as eval()
  // would do it alone, bitwise. Items name distinct sequences.
  virtual void eval_batch(std::span<const model::EvalItem> items) = 0;
  virtual void drop(int64_t seq) = 0;  // frees the sequence's cache on every device
  // Forgets the sequence's positions >= n_pos on every device (a kept prompt reused).
  virtual void truncate(int64_t seq, int64_t n_pos) = 0;
  virtual int64_t vocab() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t seq_length(int64_t seq) const = 0;
  // Memory pressure per device (ring order; one entry for a single device). May talk to
  // the workers, so only the scheduler thread calls it, between steps.
  virtual std::vector<DevicePressure> device_pressure() = 0;
  virtual RingState ring_state() const { return {}; }  // any thread
  // Called by the scheduler when no sequence is active, every few seconds: a ring lets lost
  // workers that are back rejoin.
  virtual void idle() {}
};

class LocalBackend : public Backend {
 public:
  // Takes the memory baseline now: construct it before the weights are read in.
  explicit LocalBackend(model::Engine& engine)
      : engine_(engine), base_(residency::read_memory_status()) {}
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override {
    engine_.eval(seq, tokens, logits);
  }
  void eval_batch(std::span<const model::EvalItem> items) override { engine_.eval_batch(items); }
  void drop(int64_t seq) override { engine_.drop(seq); }
  void truncate(int64_t seq, int64_t n_pos) override { engine_.truncate(seq, n_pos); }
  int64_t vocab() const override { return engine_.hparams().vocab; }
  int64_t n_ctx() const override { return engine_.n_ctx(); }
  int64_t seq_length(int64_t seq) const override { return engine_.seq_length(seq); }
  std::vector<DevicePressure> device_pressure() override;

 private:
  model::Engine& engine_;
  residency::MemoryStatus base_;
  double pressure_max_ = 0;
  uint64_t samples_ = 0;
};

// The head of a ring that re-forms without lost workers (cluster::RecoveringRing): a step
// during which a worker is lost takes longer, and the server goes on with fewer devices.
class RingBackend : public Backend {
 public:
  explicit RingBackend(cluster::RecoveringRing& ring);
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override;
  void eval_batch(std::span<const model::EvalItem> items) override;
  void drop(int64_t seq) override;
  void truncate(int64_t seq, int64_t n_pos) override;
  int64_t vocab() const override { return ring_.vocab(); }
  int64_t n_ctx() const override { return ring_.n_ctx(); }
  int64_t seq_length(int64_t seq) const override { return ring_.seq_length(seq); }
  std::vector<DevicePressure> device_pressure() override;
  RingState ring_state() const override;
  void idle() override;

 private:
  // Runs a ring call, then records any recovery it made, whether it returned or threw.
  template <typename Step>
  void tracked(Step step);
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
