// Server counters and histograms, rendered in the Prometheus text exposition format
// (GET /metrics). Thread-safe: the scheduler records, HTTP threads render.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace hearth::serve {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count lines of metric `name`.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;    // ascending upper bounds
  std::vector<uint64_t> counts_;  // (bounds + 1) per-bucket counts, last one is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Memory pressure of one device (issue 4's metric: drop of available memory since the
// device's baseline over its total, in [0, 1]); device 0 is this process.
struct DevicePressure {
  std::string name;         // device name (a worker's is what it announced)
  double pressure = 0;      // recent: mean over the steps since the previous sample
  double pressure_max = 0;  // highest seen
  uint64_t steps = 0;       // token steps measured on the device
  // For the cluster page (a ring's devices): where the device is, its layer window per round
  // ([begin, end)), and its means per token step since the previous sample.
  std::string address;
  std::vector<std::pair<int, int>> windows;
  double compute_ms = 0, wait_ms = 0, disk_bytes = 0, reload_bytes = 0;
};

// What the cluster page shows, read at once.
struct MetricsSnapshot {
  uint64_t generated_tokens = 0;
  int64_t waiting = 0, active = 0;
  double last_tpot_s = 0;  // mean time per output token of the last request that finished
  std::vector<DevicePressure> devices;
};

class Metrics {
 public:
  Metrics();
  void request_started();
  void request_finished(const std::string& finish_reason);
  void rejected();  // queue full
  void prompt_tokens(int64_t n);
  void prompt_tokens_cached(int64_t n);  // prompt tokens whose KV a finished request left
  void generated_tokens(int64_t n);
  void ttft(double seconds);
  void tpot(double seconds);
  void set_queue(int64_t waiting, int64_t active);
  void set_devices(std::vector<DevicePressure> devices);
  // One batched forward pass over `sequences` sequences and `rows` token rows.
  void batch(int64_t sequences, int64_t rows);
  // Speculative decoding: one decoding sequence's trip, with the drafts it verified and how
  // many of them passed (0 and 0 without a drafter).
  void decode_trip(int64_t drafted, int64_t accepted);
  // Paged KV: requests set back because the pool was full, and the pool's blocks now
  // (capacity 0: KV is not paged, and the gauges are left out).
  void requests_set_back(int64_t n);
  void set_kv_blocks(int64_t in_use, int64_t capacity, int64_t block_rows);

  std::string render() const;
  MetricsSnapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  uint64_t requests_ = 0, rejected_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t prompt_tokens_cached_ = 0;
  std::vector<std::pair<std::string, uint64_t>> finished_;  // finish reason -> count
  Histogram ttft_, tpot_;
  double last_tpot_s_ = 0;
  int64_t waiting_ = 0, active_ = 0;
  std::vector<DevicePressure> devices_;
  uint64_t passes_ = 0, pass_sequences_ = 0, pass_rows_ = 0;
  uint64_t decode_trips_ = 0, drafted_ = 0, draft_accepted_ = 0;
  uint64_t set_back_ = 0;
  int64_t kv_in_use_ = 0, kv_capacity_ = 0, kv_block_rows_ = 0;
};

}  // namespace hearth::serve
