// One device's part of the ring (head and worker alike): the engine over its layer windows,
// how its weights are kept in memory, and the meter. A token step through a device is
// run_window() once per round in which it has layers, then finish_step().
//
// Residency (docs/residency.md):
//   stream  the weights that fit the device's weight memory stay resident in the page cache
//           (mmap, reclaimable by the OS); the rest is streamed through a bounded buffer by a
//           reader thread (weight_streamer.h) that reads ahead of use with direct I/O, while
//           the others compute and while this device computes its resident matrices. Bytes
//           read per token = the streamed part, planned by residency::plan_stream.
//   mmap    every matrix is read from the file mapping; the kernel pages it in on use. With
//           k > 1 rounds a background thread can prefetch the next window and release the one
//           just used (prefetcher.h), the scheme before streaming, kept for comparison.
//   auto    stream when the device's weights do not fit its weight memory, else mmap (the
//           same thing when everything fits).
// A device that streams computes every matrix from the GGUF layout (streamed bytes are the
// file's); a device whose weights all fit may repack them (model::RepackMode).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/cluster/expert_store.h"
#include "hearth/cluster/prefetcher.h"
#include "hearth/cluster/weight_streamer.h"
#include "hearth/cluster/windows.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/residency/device_meter.h"
#include "hearth/residency/page_ranges.h"

namespace hearth::cluster {

enum class ResidencyMode { kAuto, kStream, kMmap };
// "auto" | "stream" | "mmap"; UsageError naming the flag otherwise.
ResidencyMode parse_residency_mode(std::string_view text);
std::string_view residency_mode_name(ResidencyMode m);

// A device's residency choices (hearth run / hearth worker flags).
struct ResidencyOptions {
  ResidencyMode mode = ResidencyMode::kAuto;
  // Memory for this device's weights, resident part and stream buffer together; 0: measured
  // at start (cgroup-aware available memory minus the KV cache and working buffers).
  uint64_t weight_memory = 0;
  // Stream buffer; 0: the default (the minimum for k = 1; for k > 1 the streamed part of one
  // window, within a quarter of the weight memory and residency::stream_buffer_cap).
  uint64_t stream_buffer = 0;
  // The device memory the pressure target is a share of (residency::kPressureTarget: stream
  // buffer cap and row-slice size); 0: measured (the cgroup limit, or MemTotal).
  uint64_t total_memory = 0;
  // How the streamed part is read (weight_streamer.h): direct I/O into an anonymous buffer, or
  // through the page cache (reclaimable, more CPU per byte).
  StreamIo stream_io = StreamIo::kDirect;
  // mmap mode, k > 1: prefetch the next window / release the one used.
  bool prefetch = true;
  residency::PrefetchMethod method = residency::PrefetchMethod::kWillNeed;
  residency::ReleaseMode release = residency::ReleaseMode::kAuto;
  model::RepackMode repack = model::RepackMode::kAuto;
};

struct StageOptions {
  std::vector<Window> windows;  // (k) this device's window per round; some may be empty
  int threads = 0;
  int64_t n_ctx = 0;
  compute::KvTypes kv_types = {};
  bool with_output = false;  // the head: embedding and output layer
  ResidencyOptions residency;
};

// What the stage decided about its memory (reported per device).
struct StageLayout {
  ResidencyMode mode = ResidencyMode::kMmap;  // kStream or kMmap as resolved
  uint64_t weight_memory = 0;                 // budget for weights incl. the stream buffer
  residency::StreamPlan stream;               // assigned / resident / streamed / buffer bytes
  bool direct_io = false;
};

class Stage {
 public:
  // `file` must outlive the stage. Throws UsageError on bad windows.
  Stage(const gguf::GgufFile& file, StageOptions options);
  ~Stage();
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  model::Engine& engine() { return *engine_; }
  int rounds() const { return static_cast<int>(opt_.windows.size()); }
  Window window(int round) const { return opt_.windows[static_cast<size_t>(round)]; }
  const StageLayout& layout() const { return layout_; }

  // Runs round `round`'s window over the batch, hidden (rows, dim) in place, metered.
  void run_window(int round, std::span<const model::BatchSegment> segments, float* hidden);
  // Head: logits of the batch after the last layer, metered as compute.
  void logits(std::span<const model::EvalItem> items, const float* hidden);
  void add_send(double ms) { meter_->add_send(ms); }
  void add_wait_ms(double ms) { meter_->add_wait_ms(ms); }
  // Ends a token step (`decode`: every sequence advanced by one token).
  residency::StepStats finish_step(bool decode);
  const residency::DeviceTotals& totals() const { return meter_->totals(); }
  uint64_t prefetched_bytes() const { return prefetch_ ? prefetch_->bytes_advised() : 0; }
  bool releases() const { return prefetch_ && prefetch_->releases(); }

  // The byte ranges of window `w`'s matrices this device keeps resident (all of them when it
  // does not stream).
  std::vector<residency::ByteRange> resident_ranges(Window w) const;

 private:
  void recalibrate(const residency::StepStats& st);
  // Starts the reader of layout_.stream's streamed part (start-up and re-plans alike).
  void start_streaming(bool prefetch_resident);
  // Starts the expert store of a mixture whose experts do not all fit, keeping
  // `resident_bytes` of them resident.
  void start_experts(std::span<const int> layers, uint64_t resident_bytes);
  // The residency plan for `weight_memory` (keeping `streamed_before` streamed).
  residency::StreamPlan plan_for(uint64_t weight_memory, std::vector<bool> streamed_before) const;

  const gguf::GgufFile& file_;
  StageOptions opt_;
  StageLayout layout_;
  std::unique_ptr<model::Engine> engine_;
  std::unique_ptr<residency::MappedPages> pages_;
  std::unique_ptr<residency::DeviceMeter> meter_;
  std::unique_ptr<WindowPrefetcher> prefetch_;      // mmap mode, k > 1
  std::unique_ptr<WeightStreamer> streamer_;        // stream mode with something to stream
  std::unique_ptr<ExpertStore> experts_;            // a mixture whose experts do not all fit
  std::vector<residency::PlannedMatrix> matrices_;  // every matrix, in use order
  uint64_t fixed_bytes_ = 0;    // always resident: norms, biases, the head's output layer
  uint64_t working_bytes_ = 0;  // profiler::stage_working_bytes
  uint64_t kv_bytes_ = 0;       // KV cache of its layers at the full context
  uint64_t total_memory_ = 0;   // what the pressure target is a share of
  uint64_t advised0_ = 0, released0_ = 0;
  StreamCounters stream0_;
  ExpertStore::Counters experts0_;
  bool settle_ = false;  // skip one recalibration check after a re-plan
};

}  // namespace hearth::cluster
