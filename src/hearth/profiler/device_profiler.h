// Measures this device for the planner (issue 5, paper v2 §3.2): OS class, cores, the
// engine's own matvec throughput per weight type at decode sizes, memory read bandwidth,
// KV-append time, cgroup-aware memory and swap, and disk reads of the model file with the
// page cache bypassed. No GPU backend exists: gpu.kind is "none" with zero VRAM.
//
// The link to the next device cannot be measured alone; the profile carries a placeholder
// (rtt 0, 10000 Mbps, said in `notes`) that the head overwrites with what it measures
// through the ring's own transport at set-up (cluster/link_probe.h).
//
// Measuring takes a few seconds, so the result is cached in
// $XDG_CACHE_HOME/hearth/profile-<host>.json (default ~/.cache/hearth), keyed by the model
// file's identity (path, size, mtime, inode), the thread count and the hearth version; a
// cache hit re-reads only the memory figures, which change from minute to minute.
#pragma once

#include <string>

#include "hearth/profile/device_profile.h"
#include "hearth/profiler/memory_info.h"

namespace hearth::profiler {

struct ProfilerOptions {
  std::string model_path;         // required: disk reads and the KV row size come from it
  std::string name;               // device name; "" = host name
  int threads = 0;                // threads the engine will use; 0 = all cores this process may use
  bool refresh = false;           // measure even when the cache holds a matching profile
  bool use_cache = true;          // false: neither read nor write the cache
  std::string cache_dir;          // "" = $XDG_CACHE_HOME/hearth or $HOME/.cache/hearth
  std::string version;            // hearth version, part of the cache key
  MemoryRoots memory;             // where /proc and /sys/fs/cgroup are (tests point elsewhere)
  double kernel_budget_s = 0.06;  // per weight type
  double disk_budget_s = 0.3;     // per read pattern
};

struct ProfileResult {
  profile::DeviceProfile profile;
  bool from_cache = false;
  std::string cache_path;   // "" when the cache is off
  double measure_ms = 0;    // time spent measuring (0 on a cache hit)
  std::string disk_method;  // how the page cache was bypassed ("" on a cache hit)
};

// Cores this process may run on (sched_getaffinity, narrowed by a cgroup v2 cpu.max quota).
int usable_cores(const MemoryRoots& roots = {});

// Measures everything now. IoError / FormatError when the model file or /proc cannot be read.
profile::DeviceProfile measure_device(const ProfilerOptions& options,
                                      std::string* disk_method = nullptr);

// The cached profile when its key matches (memory figures re-read), else measures and stores.
// A corrupt or foreign cache file is ignored and overwritten (written atomically, so workers
// on one host profiling at once never read half a file).
ProfileResult device_profile(const ProfilerOptions& options);

std::string cache_path_for(const ProfilerOptions& options);

}  // namespace hearth::profiler
