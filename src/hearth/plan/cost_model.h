// Two cost models predict the time per output token (TPOT) of a layer assignment (w, n) on a
// ring of profiled devices, with a per-device breakdown into compute, memory access, disk
// reads and communication.
//
// kPaper — prima.cpp's model (paper v2 A.3, Eq. 11-19):
// T = sum_m (T_comp + T_mem + T_disk + T_comm) — a sum, not a max, because the paper takes the
// worst case in which no device's prefetch overlaps another device's work (A.3).
//
// Disk reload follows the OS class (the four device sets of A.3):
//   M1 macOS without Metal, overloaded: reload (l b' + io + c_cpu - d_avail) at random-read speed
//   M2 macOS with Metal, overloaded:    reload every weight byte, l b + io, at random-read speed
//   M3 Linux/Android/Windows, overloaded: reload ((l-l_gpu) b' + io + c_cpu - d_avail - swap),
//      sequential reads on Linux/Android (mmap advised sequential), random on Windows/macOS
//   M4 enough memory:                   only the embedding-row lookup on the head
// where b' = b + KV bytes of one layer at the context length, io = b_i/V + b_o on the head.
// Because each device's term depends only on its own (w_m, n_m) once k = L/W is fixed, the
// objective is separable per device; Halda's ILP and the exhaustive search both rely on that.
//
// kOverlap — the engine that keeps a fixed resident part of each device's weights and streams
// the rest with direct I/O through a bounded buffer, reading ahead of use while other devices
// compute (docs/plan.md, "The overlap model"). A device whose weights A fit its memory cap
// reads nothing; otherwise it streams X = A - cap + C bytes per token through a buffer of C
// bytes, fills the buffer during each of its k idle gaps (plus the burst B its disk serves
// beyond its rate after a gap, profile::DeviceProfile::disk_burst_bytes, at the disk's peak
// rate) and reads the rest during its own compute; only what is left is exposed (e).
// TPOT = sum_m (T_comp + T_mem + e + T_comm). The buffer a device can fill depends on how long
// the others compute, so the objective is no longer separable: predict() solves the ring's
// small LP in (t, C, e) exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/profile/device_profile.h"
#include "hearth/profile/model_profile.h"
#include "hearth/residency/stream_plan.h"

namespace hearth::plan {

enum class CostModel { kPaper, kOverlap };
std::string_view cost_model_name(CostModel m);      // "paper" | "overlap"
CostModel parse_cost_model(std::string_view name);  // UsageError for anything else

struct CostOptions {
  uint32_t ctx = 4096;  // n_kv: tokens in the KV cache when the token is generated
  // s^disk_threshold: below this a disk is "slow" and its device may not overload RAM
  // (set M4 by disk speed, paper Case 4). The paper gives no value; 0.1 GB/s is below every
  // published testbed disk and above SD cards and spinning disks at random reads.
  double slow_disk_bps = 0.1e9;
  CostModel model = CostModel::kOverlap;
  // kOverlap only: devices stream their non-resident weights through a bounded buffer. false:
  // they run plain mmap, and a device over its memory re-reads all its weights every token
  // (a cyclic scan a little larger than memory makes LRU evict every page before its reuse).
  bool streaming = true;
  // kOverlap, streaming: the memory pressure a device's stream buffer may bring it to, as a
  // share of its total memory (residency::stream_buffer_cap; the devices use the default).
  // It bounds the buffer C and sets the row-slice size, hence C_min. 1: no bound.
  double pressure_target = residency::kPressureTarget;
};

struct Problem {
  std::vector<profile::DeviceProfile> devices;  // ring order, head at index 0
  profile::ModelProfile model;
  CostOptions options;
};

// Throws UsageError when the problem cannot be costed: no devices, head not first, a device
// without throughput for a weight type the model uses, a GPU without throughput.
void check_problem(const Problem& p);

enum class MemCase {
  kAuto,        // decide from the memory need, as the real system does (the cost model)
  kOverloaded,  // force sets M1-M3: linear reload term, may be negative off its region
  kFits,        // force set M4
};

// Every term of one device for l layers (l_gpu of them on the GPU) in `windows` windows.
struct DeviceTerms {
  double compute_s = 0, memory_s = 0, disk_s = 0, comm_s = 0;
  double ram_need = 0, ram_cap = 0;        // bytes the mmapped weights need vs what the OS leaves
  double pinned_need = 0, pinned_cap = 0;  // KV cache + buffers: cannot be reclaimed
  double vram_need = 0, vram_cap = 0;      // layers pinned in VRAM (Metal: shared memory)
  bool overloaded = false;                 // ram_need > ram_cap: pages are reloaded per token
  bool slow_disk = false;
  double total_s() const { return compute_s + memory_s + disk_s + comm_s; }
};
DeviceTerms device_terms(const Problem& p, size_t m, double l, double l_gpu, double windows,
                         double hops, MemCase mc);
double disk_read_bps(const profile::DeviceProfile& d);  // the throughput the OS case uses
// One hop into device d over its link.
double link_latency_s(const profile::DeviceProfile& d, uint64_t hidden_bytes);

// A streaming device under the overlap model when the token takes t (the closed form of the
// ring's LP, cost_model.cpp): the buffer it reads ahead into, the largest in [buffer_min,
// buffer_max] whose read with the excess still fits in t - comm and still helps (at k = 1 the
// smallest: a buffer cannot help), and the read time that neither its idle gaps (each fills
// the buffer, and a disk with a burst allowance serves `burst_bytes` more after it, at no
// more than its peak rate) nor its own compute hide. The caller checks that
// t >= comm + (excess + buffer_min) / s.
struct DiskRates {
  double seq_bps = 1;      // s: the sustained rate
  double burst_bytes = 0;  // B: served beyond s right after an idle gap
  double peak_bps = 0;     // u: the rate the burst comes at (0: at once)
};
struct StreamAt {
  double buffer = 0, exposed_s = 0;
};
StreamAt stream_at(double excess, double busy_s, double comm_s, double buffer_min,
                   double buffer_max, const DiskRates& disk, uint32_t k, double t);

// How a device gets its weights under the overlap model.
enum class ReadMode {
  kFits,         // A <= cap: everything resident, nothing read per token
  kStreams,      // A > cap: R = cap - C resident, X = A - R streamed through a buffer of C
  kThrashes,     // A > cap without streaming (plain mmap): all of A re-read, all exposed
  kMetalReload,  // Metal over its working set: the paper's reload of every weight, exposed
};

// The part of one device's overlap terms that does not depend on the ring's TPOT.
struct OverlapTerms {
  DeviceTerms paper;  // compute, memory, comm, memory and VRAM limits (paper terms)
  ReadMode mode = ReadMode::kFits;
  double busy_s = 0;            // T: compute + memory (the paper's terms, summed)
  double assigned_bytes = 0;    // A: weights read per token on the CPU (+ io on the head)
  double cap_bytes = 0;         // ram_cap - pinned_need: room for resident weights and buffer
  double buffer_min_bytes = 0;  // C_min: two stream units (row slices on a small device)
  // C_max = max(C_min, share): the most the buffer may take within the pressure target
  // (residency::stream_buffer_cap; the devices apply the same rule), where the share is the
  // target's part of total memory less the working buffers and the KV cache at ctx, linear in
  // the device's layers and negative where the KV cache fills it.
  double buffer_share_bytes = 0;
  double buffer_max_bytes = 0;
  double disk_bps = 0;          // s
  double disk_burst_bytes = 0;  // B: streaming only, the disk's burst after an idle gap
  double disk_peak_bps = 0;     // u: streaming only, the rate of that burst (0: at once)
  double fixed_exposed_s = 0;   // kThrashes, kMetalReload (and Metal's lookup): exposed reads
  double fixed_read_bytes = 0;  // the bytes behind fixed_exposed_s
  // A mixture of experts: the experts' bytes that do not fit (memory holds the dense weights
  // first), and the share of them a token reads where the router picks them (in the fixed
  // terms above: reads nothing hides).
  double expert_out_bytes = 0;
  double expert_read_bytes = 0;
  // E = A - cap, less the experts left out: the dense weights a token streams.
  double excess_bytes() const { return assigned_bytes - cap_bytes - expert_out_bytes; }
};
// l layers (l_gpu on the GPU) in `windows` windows with `hops` hops per token.
OverlapTerms overlap_terms(const Problem& p, size_t m, double l, double l_gpu, double windows,
                           double hops);
// Why the device cannot run this load under the problem's cost model, or "" when it can:
// VRAM, KV cache and buffers, a slow disk that would have to reload or stream, a streaming
// buffer that does not fit.
std::string device_violation(const Problem& p, size_t m, double l, double l_gpu, double windows,
                             double hops);

struct DeviceCost {
  uint32_t w = 0, n = 0;
  bool relay = false;
  uint32_t layers = 0, gpu_layers = 0, windows = 0;  // l_m, l_m^gpu, W_m per token
  double compute_s = 0, memory_s = 0, comm_s = 0;
  double disk_s = 0;        // time to read the bytes read per token (overlap: D = X / s)
  double exposed_s = 0;     // the part of disk_s no other work hides (paper: all of disk_s)
  bool overloaded = false;  // the weights do not all fit: the device reads some per token
  double ram_need_bytes = 0, ram_cap_bytes = 0;  // the paper's memory need and cap
  double assigned_bytes = 0;                     // A: weights of its CPU layers (+ io on the head)
  double weight_budget_bytes = 0;  // resident weights: cap - C when streaming, cap otherwise
  double stream_bytes = 0;         // X: bytes read from disk per token
  double expert_read_bytes = 0;    // of which a mixture's experts read where routed
  double stream_buffer_bytes = 0;  // C: the streaming buffer
  // Both models: tpot_s = sum over devices of total_s().
  double total_s() const { return compute_s + memory_s + exposed_s + comm_s; }
};

struct Prediction {
  bool feasible = true;
  std::string reason;  // why not, naming the device
  double tpot_s = 0;
  uint32_t W = 0;                   // sum of windows
  uint32_t k = 0;                   // rounds per token (ceil(L / W))
  std::vector<DeviceCost> devices;  // (devices.size()), ring order
};

// Predicts TPOT of windows `w` and GPU layers `n` (one entry per device, ring order) under
// p.options.model. A device with w = 0 takes no part unless `relay` marks it as a forwarding
// hop; under kOverlap the head may have w = 0 (it then embeds, computes the output layer and
// forwards the hidden state once per round). L need not be
// a multiple of W: the last round fills devices in ring order (paper's l_m with R = L mod W).
// Infeasible plans (VRAM overflow, KV cache beyond memory, slow disk overloaded) still get
// their times, with feasible = false and the reason.
Prediction predict(const Problem& p, const std::vector<uint32_t>& w, const std::vector<uint32_t>& n,
                   const std::vector<bool>& relay = {});

}  // namespace hearth::plan
