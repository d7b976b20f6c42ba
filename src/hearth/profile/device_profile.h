// What the planner knows about one device: the plain struct a device profiler fills and the
// DEVICES.json document (schema in docs/plan.md) that carries a ring of them.
//
// Goals: every quantity the TPOT cost model of prima.cpp (paper A.3, Eq. 11-41) needs, in SI
// units inside the program (bytes, bytes/s, FLOP/s, seconds); human units with the unit in the
// field name in JSON (GiB, GB/s, GFLOPS, ms, Mbps), so testbeds can be written by hand.
// Non-goals: measuring anything (the profilers do that) or deciding anything (plan/ does).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "hearth/gguf/tensor_type.h"

namespace hearth::profile {

inline constexpr int kDevicesSchemaVersion = 1;

// How the OS reclaims mmapped pages decides the disk-reload case of the cost model:
// Linux and Windows reclaim gradually, macOS with Metal drops whole working sets, Android
// swaps other apps out first (paper A.3, Eq. 15-17).
enum class OsClass { kLinux, kMac, kAndroid, kWindows };
enum class GpuKind { kNone, kCuda, kMetal };

const char* os_class_name(OsClass os);    // "linux", "mac", "android", "windows"
const char* gpu_kind_name(GpuKind kind);  // "none", "cuda", "metal"

// FLOP/s of one backend's matrix-vector product at decode sizes, per weight type.
using TypeThroughput = std::map<gguf::TensorType, double>;

struct CpuProfile {
  TypeThroughput flops;     // FLOP/s per weight type (s^{cpu,q})
  // FLOP/s of the matrix-matrix product a prompt chunk runs (64 tokens), per weight type;
  // empty when not measured (the prefill model then uses `flops`, which is slower).
  TypeThroughput matmul_flops;
  double mem_read_bps = 0;  // bytes/s streamed from RAM into registers (T^cpu)
  double kv_copy_s = 0;     // s to append one token's K and V of one layer (t^{kv_copy,cpu})
};

struct GpuProfile {
  GpuKind kind = GpuKind::kNone;
  uint64_t vram_total_bytes = 0;
  // CUDA: free VRAM. Metal: the recommended maximum working set (d^avail_metal), which on a
  // unified-memory Mac bounds weights + KV + buffers of the whole process.
  uint64_t vram_available_bytes = 0;
  TypeThroughput flops;      // FLOP/s per weight type (s^{gpu,q})
  double mem_read_bps = 0;   // bytes/s (T^gpu)
  double kv_copy_s = 0;      // s per token per layer (t^{kv_copy,gpu})
  double ram_to_vram_s = 0;  // s to copy one hidden state (4*dim bytes) host -> device
  double vram_to_ram_s = 0;  // s to copy it back
  bool uma = false;          // CPU and GPU share memory: no host<->device copies
};

// The link into this device: the hop from whichever device precedes it in the ring, so it
// stays right when device selection changes the ring (a device receives one hop for each it
// sends, so the cost model charges it to the receiver with the same counts).
struct LinkProfile {
  double rtt_s = 0;          // round-trip time of a small message
  double bandwidth_bps = 0;  // bytes/s of a hidden-state-sized message
};

struct DeviceProfile {
  std::string name;
  bool head = false;  // rank 0: holds the prompt, embedding, output layer, sampling
  OsClass os = OsClass::kLinux;
  uint32_t cores = 0;
  uint64_t ram_total_bytes = 0;
  uint64_t ram_available_bytes = 0;   // free + reclaimable (cgroup-aware), d^avail
  uint64_t swap_available_bytes = 0;  // Android: free swap (d^swap_avail)
  uint64_t swappable_bytes = 0;       // Android: other apps' memory the OS may swap out
  double disk_seq_read_bps = 0;       // bytes/s, page cache bypassed
  double disk_random_read_bps = 0;    // bytes/s, page cache bypassed
  // Bytes the disk serves beyond disk_seq_read_bps right after a short idle gap (storage that
  // accounts its rate per time slice); 0 for a disk of constant rate (profile/disk_probe.h).
  double disk_burst_bytes = 0;
  // The rate the burst is read at (bytes/s, at least disk_seq_read_bps); 0 = not measured,
  // and the cost model then counts the burst as served at once.
  double disk_peak_read_bps = 0;
  CpuProfile cpu;
  GpuProfile gpu;
  LinkProfile link;
  // Devices this one can send to directly; empty means every device. A ring hop between
  // two devices that cannot reach each other needs a relay (paper §3.3, device selection).
  std::vector<std::string> reachable;
  std::string notes;  // provenance of estimated figures; ignored by the planner

  bool has_gpu() const { return gpu.kind != GpuKind::kNone; }
  bool can_reach(const std::string& other) const;
};

// A ring of devices in ring order, as read from DEVICES.json. After parsing, the head is at
// index 0 (the ring is rotated, keeping its cyclic order).
struct DeviceSet {
  std::vector<DeviceProfile> devices;
};

// JSON in and out. Parsing validates every field and throws FormatError naming the source,
// the device and the field; `source` names the file in messages.
DeviceProfile device_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json device_to_json(const DeviceProfile& d);
DeviceSet devices_from_json(const nlohmann::json& j, const std::string& source);
nlohmann::json devices_to_json(const DeviceSet& set);
DeviceSet load_devices_file(const std::string& path);  // IoError / FormatError
// One device object (as `hearth profile --json` prints) from a file; IoError / FormatError
// naming the file and field.
DeviceProfile load_device_file(const std::string& path);

}  // namespace hearth::profile
