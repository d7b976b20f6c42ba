// The TPOT cost model of prima.cpp (paper v2 A.3, Eq. 11-19): predicted time per output token
// of a layer assignment (w, n) on a ring of profiled devices, and its per-device breakdown
// into compute, memory access, disk reload and communication.
//
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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hearth/profile/device_profile.h"
#include "hearth/profile/model_profile.h"

namespace hearth::plan {

struct CostOptions {
  uint32_t ctx = 4096;  // n_kv: tokens in the KV cache when the token is generated
  // s^disk_threshold: below this a disk is "slow" and its device may not overload RAM
  // (set M4 by disk speed, paper Case 4). The paper gives no value; 0.1 GB/s is below every
  // published testbed disk and above SD cards and spinning disks at random reads.
  double slow_disk_bps = 0.1e9;
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
double link_latency_s(const profile::DeviceProfile& d, uint64_t hidden_bytes);  // one hop

struct DeviceCost {
  uint32_t w = 0, n = 0;
  bool relay = false;
  uint32_t layers = 0, gpu_layers = 0, windows = 0;  // l_m, l_m^gpu, W_m per token
  double compute_s = 0, memory_s = 0, disk_s = 0, comm_s = 0;
  bool overloaded = false;
  double ram_need_bytes = 0, ram_cap_bytes = 0;
  double total_s() const { return compute_s + memory_s + disk_s + comm_s; }
};

struct Prediction {
  bool feasible = true;
  std::string reason;  // why not, naming the device
  double tpot_s = 0;
  uint32_t W = 0;                   // sum of windows
  uint32_t k = 0;                   // rounds per token (ceil(L / W))
  std::vector<DeviceCost> devices;  // (devices.size()), ring order
};

// Predicts TPOT of windows `w` and GPU layers `n` (one entry per device, ring order). A
// device with w = 0 takes no part unless `relay` marks it as a forwarding hop. L need not be
// a multiple of W: the last round fills devices in ring order (paper's l_m with R = L mod W).
// Infeasible plans (VRAM overflow, KV cache beyond memory, slow disk overloaded) still get
// their times, with feasible = false and the reason.
Prediction predict(const Problem& p, const std::vector<uint32_t>& w, const std::vector<uint32_t>& n,
                   const std::vector<bool>& relay = {});

}  // namespace hearth::plan
