// Per-token, per-device residency metrics of the ring (issue 4; prima.cpp v2 A.14): time in
// compute / communication / waiting, bytes prefetched and released, and, for each window
// computed, the bytes that had to be reloaded during compute (pages of the window not in the
// page cache just before compute, by mincore) and the major page faults taken meanwhile.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "hearth/residency/memory_status.h"
#include "hearth/residency/page_ranges.h"

namespace hearth::residency {

// One token step of one device (sums over its rounds).
struct StepStats {
  double compute_ms = 0;
  double comm_ms = 0;  // sending hidden states
  double sends = 0;    // hidden-state messages sent (hops this device makes)
  double wait_ms = 0;  // idle, waiting for the hidden state to come round
  double major_faults = 0;
  double reload_bytes = 0;    // window bytes not resident just before its compute
  double prefetch_bytes = 0;  // bytes asked for by the prefetcher during the step
  double release_bytes = 0;   // resident bytes released during the step
  double pressure = 0;        // memory pressure at the end of the step, [0, 1] (paper's)
  double pressure_unreclaimed = 0;  // the same counting page cache as used (the old figure)
  double disk_bytes = 0;      // bytes this process read from storage during the step
  double stream_bytes = 0;    // of those, bytes the weight streamer read
  double read_ms = 0;         // time the streamer spent reading
  double exposed_ms = 0;      // time compute waited for streamed weights
  // A mixture's experts: picked by the router here, of those read from storage (not
  // resident), the bytes and the time (compute waits all of it) those reads took.
  double expert_uses = 0;
  double expert_reads = 0;
  double expert_bytes = 0;
  double expert_active_bytes = 0;  // the read experts' own bytes (expert_bytes: whole blocks)
  double expert_read_ms = 0;
  double decode = 0;          // 1: every sequence of the step advanced by one token
  // The device's residency layout (constant over a session; carried with every step so the
  // head needs no other message): bytes of its weights, what the resident part may take, and
  // the stream buffer.
  double assigned_bytes = 0;
  double weight_budget_bytes = 0;
  double stream_buffer_bytes = 0;
};

// Keys and values as carried in net::Stats metrics, in a fixed order.
std::vector<std::pair<std::string, double>> to_fields(const StepStats& s);
// Unknown keys are ignored; non-finite or negative values are treated as 0 (a peer's bad
// numbers must not poison the head's totals).
StepStats from_fields(std::span<const std::pair<std::string, double>> fields);

// Sums of a device's steps, and of its decode steps alone (the per-token figures of the
// offload regime leave out load and prefill). Layout fields hold the last step's values.
struct DeviceTotals {
  uint64_t steps = 0;
  StepStats sum;  // sum.pressure is the sum of per-step pressures
  double pressure_max = 0;
  double pressure_unreclaimed_max = 0;
  uint64_t decode_steps = 0;
  StepStats decode_sum;
  void add(const StepStats& s);
  double pressure_mean() const { return steps ? sum.pressure / static_cast<double>(steps) : 0.0; }
  // Per decoded token (0 without decode steps).
  double per_decode_token(double StepStats::*field) const {
    return decode_steps ? decode_sum.*field / static_cast<double>(decode_steps) : 0.0;
  }
  // Per decoded token, or per step when no step decoded (a one-token run): the first step
  // also pages in the weights and runs the prompt, so it would swamp a mean over all steps.
  double per_token(double StepStats::*field) const {
    if (decode_steps) return per_decode_token(field);
    return steps ? sum.*field / static_cast<double>(steps) : 0.0;
  }
  // The steps that were not decode steps (load and prompt), summed.
  double prompt_total(double StepStats::*field) const { return sum.*field - decode_sum.*field; }
};

// Bytes this process has read from storage so far (/proc/self/io read_bytes: every read it
// caused to reach the block layer, page faults, readahead and direct I/O alike); nullopt where
// the kernel does not account it.
std::optional<uint64_t> process_read_bytes();

// Major page faults of this process so far (getrusage RUSAGE_SELF), and of the calling
// thread (RUSAGE_THREAD).
uint64_t process_major_faults();
uint64_t thread_major_faults();

// Measures one device. Not thread-safe: the thread that computes calls it.
class DeviceMeter {
 public:
  // Takes the memory baseline now (before this device's windows are read in).
  explicit DeviceMeter(const MappedPages& pages);

  // Just before computing a window over `ranges`: counts non-resident bytes (the reload
  // this compute will do) and starts the fault and time counters. `foreign_faults` is the
  // count of major faults made by our own helper threads (the prefetcher's touching),
  // which are excluded from the compute's faults.
  void compute_begin(std::span<const ByteRange> ranges, uint64_t foreign_faults);
  void compute_end(uint64_t foreign_faults);
  void add_compute_ms(double ms) { step_.compute_ms += ms; }  // outside any window (logits)
  void add_send(double ms) {  // one hidden state sent, taking ms
    step_.comm_ms += ms;
    step_.sends += 1;
  }
  void add_wait_ms(double ms) { step_.wait_ms += ms; }
  void add_prefetch(uint64_t bytes, uint64_t released) {
    step_.prefetch_bytes += static_cast<double>(bytes);
    step_.release_bytes += static_cast<double>(released);
  }

  void add_stream(uint64_t bytes, double read_ms, double exposed_ms) {
    step_.stream_bytes += static_cast<double>(bytes);
    step_.read_ms += read_ms;
    step_.exposed_ms += exposed_ms;
  }
  void add_experts(uint64_t uses, uint64_t reads, uint64_t bytes, uint64_t active, double read_ms) {
    step_.expert_uses += static_cast<double>(uses);
    step_.expert_reads += static_cast<double>(reads);
    step_.expert_bytes += static_cast<double>(bytes);
    step_.expert_active_bytes += static_cast<double>(active);
    step_.expert_read_ms += read_ms;
  }
  void set_layout(uint64_t assigned, uint64_t weight_budget, uint64_t stream_buffer) {
    layout_ = {static_cast<double>(assigned), static_cast<double>(weight_budget),
               static_cast<double>(stream_buffer)};
  }

  // Ends the step: samples memory pressure and the bytes read from storage since the last
  // step ended, adds the step to the totals, returns it.
  StepStats finish_step(bool decode = false);
  const DeviceTotals& totals() const { return totals_; }
  const MemoryStatus& baseline() const { return base_; }

 private:
  const MappedPages& pages_;
  MemoryStatus base_;
  StepStats step_;
  DeviceTotals totals_;
  double t0_ = 0;
  uint64_t faults0_ = 0;
  uint64_t foreign0_ = 0;
  std::optional<uint64_t> read0_;
  struct {
    double assigned = 0, weight_budget = 0, stream_buffer = 0;
  } layout_;
};

}  // namespace hearth::residency
