#include "hearth/cluster/stage.h"

#include <fmt/core.h>

#include <algorithm>
#include <optional>

#include "hearth/base/clock.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/model/hparams.h"
#include "hearth/profiler/model_profiler.h"
#include "hearth/residency/memory_status.h"

namespace hearth::cluster {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

void check_windows(const std::vector<Window>& windows, int n_layers) {
  if (windows.empty()) throw UsageError("stage: no rounds");
  int prev_end = 0;
  for (size_t r = 0; r < windows.size(); ++r) {
    const Window w = windows[r];
    if (w.empty()) continue;
    if (w.begin < prev_end || w.end > n_layers) {
      throw UsageError(fmt::format("stage: window {} [{}, {}) is not ascending inside [0, {})", r,
                                   w.begin, w.end, n_layers));
    }
    prev_end = w.end;
  }
}

}  // namespace

constexpr EnumName<ResidencyMode> kResidencyModeNames[] = {{ResidencyMode::kAuto, "auto"},
                                                           {ResidencyMode::kStream, "stream"},
                                                           {ResidencyMode::kMmap, "mmap"}};

ResidencyMode parse_residency_mode(std::string_view text) {
  return parse_enum(kResidencyModeNames, text, "--residency");
}

std::string_view residency_mode_name(ResidencyMode m) {
  return enum_name(kResidencyModeNames, m);
}

Stage::Stage(const gguf::GgufFile& file, StageOptions options)
    : file_(file), opt_(std::move(options)) {
  const model::HParams hp = model::load_hparams(file_);
  const int n_layers = static_cast<int>(hp.n_layers);
  check_windows(opt_.windows, n_layers);
  std::vector<int> layers;
  for (const Window& w : opt_.windows) {
    for (int l = w.begin; l < w.end; ++l) layers.push_back(l);
  }

  // The matrices in the order a token uses them, as views into the mapping.
  const model::ModelWeights views = model::bind_weights(file_, hp);
  const uint8_t* base = file_.bytes().data();
  uint64_t fixed = 0, experts = 0;
  for (const Window& w : opt_.windows) {
    for (int l = w.begin; l < w.end; ++l) {
      const model::LayerWeights& L = views.layers[static_cast<size_t>(l)];
      for (const auto& e : L.experts) experts += ExpertStore::expert_bytes(e);
      const compute::WeightView* groups[model::kMatrixGroups][3] = {
          {&L.wq, &L.wk, &L.wv}, {&L.wo}, {&L.w_gate, &L.w_up}, {&L.w_down}};
      uint64_t layer_matrices = 0;
      for (int g = 0; g < model::kMatrixGroups; ++g) {
        for (int j = 0; j < 3; ++j) {
          const compute::WeightView* v = groups[g][j];
          // A mixture-of-experts layer has no dense feed-forward matrices: its experts are
          // read through the mapping when the router picks them (counted with the norms).
          if (v == nullptr || v->data == nullptr) continue;
          const auto* p = static_cast<const uint8_t*>(v->data);
          matrices_.push_back(residency::PlannedMatrix{l, g, static_cast<uint64_t>(p - base),
                                                       compute::gguf_bytes(*v), j, v->rows});
          layer_matrices += compute::gguf_bytes(*v);
        }
      }
      uint64_t layer_all = 0;
      for (const auto& [ptr, len] : L.spans) layer_all += len;
      fixed += layer_all - std::min(layer_all, layer_matrices);  // norms, biases, experts
    }
  }
  if (opt_.with_output) fixed += compute::gguf_bytes(views.output) + 4ull * hp.dim;

  pages_ = std::make_unique<residency::MappedPages>(file_.bytes(), file_.path());
  working_bytes_ = profiler::stage_working_bytes(hp);
  if (!layers.empty()) {
    kv_bytes_ = compute::KvCache::bytes_for(
        static_cast<int>(layers.size()), static_cast<int>(hp.n_kv_heads),
        static_cast<int>(hp.head_dim), opt_.n_ctx > 0 ? opt_.n_ctx : 4096, opt_.kv_types);
  }
  // One reading of the device's memory serves the pressure target and the weight budget.
  const residency::MemoryStatus mem = residency::read_memory_status();
  total_memory_ = opt_.residency.total_memory != 0 ? opt_.residency.total_memory : mem.total;
  // Weight memory: what is available now. In a cgroup, what is neither used nor cached, plus
  // our own pages already cached: other files' cache is counted as taken, because this
  // process's own code and libraries are part of it, and a plan that counts on evicting them
  // re-reads them every token (docs/residency.md, "Keeping the plan honest"). Without a cgroup
  // the OS's MemAvailable, less the mapped file pages (code in use). A decode step that still
  // reads beyond the streamed part shrinks it (recalibrate()).
  uint64_t budget = opt_.residency.weight_memory;
  if (budget == 0) {
    uint64_t avail = mem.available - std::min(mem.available, mem.mapped_file_bytes);
    if (mem.source.rfind("cgroup", 0) == 0) {
      std::vector<residency::ByteRange> own;
      for (const auto& m : matrices_) own.push_back({base + m.offset, m.bytes});
      avail = mem.available_unreclaimed + pages_->resident_bytes(own);
    }
    // Working buffers, and headroom for message buffers, thread stacks, allocator slack.
    const uint64_t reserve = working_bytes_ + kv_bytes_ + 8 * kMiB;
    budget = avail > reserve ? avail - reserve : 0;
    log::debug(
        "stage: weight memory {} MiB: available {} MiB ({}; unreclaimed {} MiB, file {} "
        "MiB, mapped {} MiB), reserve {} MiB",
        budget / kMiB, avail / kMiB, mem.source, mem.available_unreclaimed / kMiB,
        mem.file_bytes / kMiB, mem.mapped_file_bytes / kMiB, reserve / kMiB);
  }
  layout_.weight_memory = budget;

  // A mixture's experts take what the dense weights leave (those are read every token; an
  // expert by its share): when they do not all fit, the ones that do stay resident and the
  // others are read where the router picks them, through a buffer of one token's experts.
  uint64_t dense = fixed - experts;
  for (const auto& m : matrices_) dense += m.bytes;
  std::optional<uint64_t> resident_experts;  // set: an expert store keeps this many bytes
  if (experts > 0 && dense + experts > budget) {
    const uint64_t buffer = ExpertStore::buffer_bytes_for(views, layers);
    const uint64_t room = budget > dense + buffer ? budget - dense - buffer : 0;
    resident_experts = std::min(room, experts);
    fixed = fixed - experts + *resident_experts + buffer;
  }
  fixed_bytes_ = fixed;
  layout_.stream = plan_for(budget, {});
  const bool streams = !layout_.stream.fits();
  layout_.mode = opt_.residency.mode == ResidencyMode::kStream ||
                         (opt_.residency.mode == ResidencyMode::kAuto && streams)
                     ? ResidencyMode::kStream
                     : ResidencyMode::kMmap;
  const bool streaming = layout_.mode == ResidencyMode::kStream && streams;

  model::EngineOptions eo;
  eo.threads = opt_.threads;
  eo.n_ctx = opt_.n_ctx;
  eo.kv_types = opt_.kv_types;
  eo.layers = layers;
  eo.with_output = opt_.with_output;
  eo.repack = opt_.residency.repack;
  eo.memory_available = mem.available;  // the figure this stage planned its memory with
  eo.memory_source = mem.source;
  // A streaming device computes from the file's bytes; with k > 1 rounds in mmap mode the
  // windows come and go from the page cache: both keep the GGUF layout.
  // An expert store reads experts into a buffer in the file's layout.
  if (streaming || rounds() > 1 || resident_experts) eo.repack = model::RepackMode::kOff;
  eo.no_layers = layers.empty();  // a head with no layers still embeds and computes logits
  engine_ = std::make_unique<model::Engine>(file_, eo);
  meter_ = std::make_unique<residency::DeviceMeter>(*pages_);
  if (resident_experts) start_experts(layers, *resident_experts);
  meter_->set_layout(layout_.stream.assigned_bytes,
                     streams ? layout_.stream.weight_budget_bytes : budget,
                     streaming ? layout_.stream.buffer_bytes : 0);

  if (streaming) {
    start_streaming(true);
    log::info(
        "stage: layers {} MiB + fixed {} MiB in {} MiB of weight memory: {} MiB resident, {} "
        "MiB streamed per token through a {} MiB buffer ({})",
        (layout_.stream.assigned_bytes - fixed) / kMiB, fixed / kMiB, budget / kMiB,
        layout_.stream.resident_bytes / kMiB, layout_.stream.streamed_bytes / kMiB,
        layout_.stream.buffer_bytes / kMiB, streamer_->read_path());
    return;
  }
  // mmap mode: the prefetch/release scheme for k > 1 rounds.
  std::vector<residency::ByteRange> share;
  for (const Window& w : opt_.windows) {
    const auto rr = window_ranges(engine_->weights(), w);
    share.insert(share.end(), rr.begin(), rr.end());
  }
  const bool release =
      residency::release_enabled(opt_.residency.release, pages_->span_bytes(share),
                                 pages_->resident_bytes(share), meter_->baseline());
  // Window prefetch would read every expert of a window, which an expert store reads on demand.
  if (rounds() > 1 && (opt_.residency.prefetch || release) && engine_->repacked_bytes() == 0 &&
      !experts_) {
    prefetch_ = std::make_unique<WindowPrefetcher>(
        engine_->weights(), *pages_, opt_.residency.prefetch, opt_.residency.method, release);
    prefetch_->request(window(0));  // warm the first window while the ring sets up
  }
}

Stage::~Stage() = default;

// The resident experts are read at start-up (as a streaming device's resident part is), the
// others' pages dropped from the cache.
void Stage::start_experts(std::span<const int> layers, uint64_t resident_bytes) {
  experts_ = std::make_unique<ExpertStore>(file_.path(), file_.bytes().data(), engine_->weights(),
                                           layers, resident_bytes);
  engine_->set_expert_feed(experts_.get());
  std::vector<residency::ByteRange> resident, cold;
  for (const auto& [p, n] : experts_->ranges(true)) resident.push_back({p, n});
  for (const auto& [p, n] : experts_->ranges(false)) cold.push_back({p, n});
  // A fault in a resident expert must not read ahead into its cold neighbours.
  pages_->advise_random();
  pages_->release(cold);
  pages_->prefetch(resident, residency::PrefetchMethod::kBoth);
  log::info(
      "stage: {} of {} experts resident ({} MiB), the others read when routed through a {} MiB "
      "buffer",
      experts_->resident_experts(), layers.size() * engine_->hparams().n_experts,
      experts_->resident_bytes() / kMiB, experts_->buffer_bytes() / kMiB);
}

// Faults must read only what they touch: no readahead into streamed bytes, and no small
// tensors in the mapping between streamed matrices. Pages of the streamed part left in the
// cache by an earlier reader would only take room from the resident part: drop them; then,
// at start-up, read the resident part before the device reports ready. Asked for only in
// the background, part of it was still being read (page by page, through faults) while the
// first tokens streamed, the two competing for the disk.
void Stage::start_streaming(bool prefetch_resident) {
  const uint8_t* base = file_.bytes().data();
  std::vector<residency::ByteRange> streamed, resident;
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const residency::ByteRange r{base + matrices_[i].offset, matrices_[i].bytes};
    (layout_.stream.streamed[i] ? streamed : resident).push_back(r);
  }
  engine_->pin_small_tensors();
  pages_->advise_random();
  pages_->release(streamed);
  if (prefetch_resident) pages_->prefetch(resident, residency::PrefetchMethod::kBoth);
  streamer_ = std::make_unique<WeightStreamer>(file_.path(), base, matrices_, layout_.stream,
                                               opt_.residency.stream_io);
  stream0_ = StreamCounters{};
  layout_.direct_io = streamer_->direct_io();
}

// Default buffer: the minimum for k = 1 (a larger one only adds reads); with k > 1 rounds the
// streamed part of one window, so the reads of a window fit in the idle time before it
// (docs/plan.md, the overlap model), within a quarter of the weight memory and within the
// pressure target's cap (residency::stream_buffer_cap: what the working buffers and the KV
// cache at the full context leave of the share), matrices read in row slices that two fit the
// cap. The cost model plans with the same rule.
residency::StreamPlan Stage::plan_for(uint64_t weight_memory,
                                      std::vector<bool> streamed_before) const {
  uint64_t assigned = fixed_bytes_;
  for (const auto& m : matrices_) assigned += m.bytes;
  residency::StreamPlanInput in{matrices_, fixed_bytes_, weight_memory, 0, 4096, 0, {}};
  in.slice_bytes = residency::stream_slice_bytes(total_memory_);
  uint64_t buffer = opt_.residency.stream_buffer;
  if (buffer == 0 && rounds() > 1 && assigned > weight_memory) {
    const uint64_t cap = residency::stream_buffer_cap(total_memory_, working_bytes_ + kv_bytes_,
                                                      residency::min_stream_buffer(in));
    buffer = std::min({(assigned - weight_memory) / (rounds() - 1), weight_memory / 4, cap});
  }
  in.buffer_bytes = buffer;
  in.streamed_before = std::move(streamed_before);
  return residency::plan_stream(in);
}

std::vector<residency::ByteRange> Stage::resident_ranges(Window w) const {
  if (!streamer_ && !experts_) return window_ranges(engine_->weights(), w);
  std::vector<residency::ByteRange> out;
  // With an expert store: the dense matrices and the resident experts (the others are read
  // when routed, never through the mapping).
  if (experts_) {
    for (const auto& [p, n] : experts_->ranges(true, w.begin, w.end)) out.push_back({p, n});
  }
  const uint8_t* base = file_.bytes().data();
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const auto& m = matrices_[i];
    if (m.layer >= w.begin && m.layer < w.end && !layout_.stream.streamed[i]) {
      out.push_back({base + m.offset, m.bytes});
    }
  }
  return out;
}

void Stage::run_window(int round, std::span<const model::BatchSegment> segments, float* hidden) {
  const Window w = window(round);
  if (w.empty()) return;
  auto foreign = [&] { return prefetch_ ? prefetch_->own_major_faults() : 0; };
  meter_->compute_begin(resident_ranges(w), foreign());
  engine_->forward_batch(segments, w.begin, w.end, hidden, streamer_.get());
  meter_->compute_end(foreign());
  // While the others compute, bring in the window this device needs next (the next round's,
  // or round 0's of the next token after the last round).
  if (prefetch_) prefetch_->request(window((round + 1) % rounds()), w);
}

void Stage::logits(std::span<const model::EvalItem> items, const float* hidden) {
  const double t0 = now_ms();
  engine_->batch_logits(items, hidden);
  meter_->add_compute_ms(now_ms() - t0);
}

residency::StepStats Stage::finish_step(bool decode) {
  if (prefetch_) {
    meter_->add_prefetch(prefetch_->bytes_advised() - advised0_,
                         prefetch_->bytes_released() - released0_);
    advised0_ = prefetch_->bytes_advised();
    released0_ = prefetch_->bytes_released();
  }
  if (streamer_) {
    const StreamCounters c = streamer_->counters();
    meter_->add_stream(c.bytes_read - stream0_.bytes_read, c.read_ms - stream0_.read_ms,
                       c.exposed_ms - stream0_.exposed_ms);
    stream0_ = c;
  }
  if (experts_) {
    const ExpertStore::Counters c = experts_->counters();
    meter_->add_experts(c.uses - experts0_.uses, c.reads - experts0_.reads,
                        c.bytes_read - experts0_.bytes_read,
                        c.expert_bytes - experts0_.expert_bytes, c.read_ms - experts0_.read_ms);
    experts0_ = c;
  }
  const residency::StepStats st = meter_->finish_step(decode);
  if (decode) recalibrate(st);
  // The plan reserves working buffers for kStageRows rows: a longer prompt's scratch goes
  // back once its step is over (measured above, so its peak still counts). Decode steps keep
  // theirs, so many sequences decoding together do not reallocate every step.
  if (!decode) engine_->trim_scratch(static_cast<int64_t>(profiler::kStageRows));
  return st;
}

// The weight memory measured at start is an estimate (what the kernel will really leave to
// the resident part depends on everything else in the cgroup). A decode step that reads far
// more from storage than the streamed part means the resident part is being evicted and
// re-read, the cyclic-scan thrash streaming exists to avoid: shrink the weight memory by a
// third of the overflow and plan again. Only for a measured budget (--weight-memory is kept).
void Stage::recalibrate(const residency::StepStats& st) {
  if (opt_.residency.weight_memory != 0 || opt_.residency.mode == ResidencyMode::kMmap) return;
  if (engine_->repacked_bytes() != 0) return;
  if (settle_) {
    settle_ = false;
    return;
  }
  const double planned = st.stream_bytes + st.expert_bytes;
  const double extra = st.disk_bytes > planned ? st.disk_bytes - planned : 0.0;
  const double resident = static_cast<double>(layout_.stream.resident_bytes);
  if (extra <= std::max(4.0 * static_cast<double>(kMiB), resident / 20)) return;
  const uint64_t cut =
      static_cast<uint64_t>(std::min(extra / 3, static_cast<double>(layout_.weight_memory) / 3));
  if (cut == 0 || cut >= layout_.weight_memory) return;
  layout_.weight_memory -= cut;
  streamer_.reset();
  layout_.stream = plan_for(layout_.weight_memory, layout_.stream.streamed);
  settle_ = true;  // the step after a re-plan still carries the old plan's read-ahead
  if (layout_.stream.fits()) return;  // cannot happen after a cut, but keep the invariant
  layout_.mode = ResidencyMode::kStream;
  prefetch_.reset();  // an mmap-mode device that turned out not to fit streams from now on
  start_streaming(false);
  meter_->set_layout(layout_.stream.assigned_bytes, layout_.stream.weight_budget_bytes,
                     layout_.stream.buffer_bytes);
  log::info(
      "stage: {:.0f} MiB read per token beyond the streamed part: weight memory down to {} "
      "MiB, {} MiB streamed per token",
      extra / kMiB, layout_.weight_memory / kMiB, layout_.stream.streamed_bytes / kMiB);
}

}  // namespace hearth::cluster
