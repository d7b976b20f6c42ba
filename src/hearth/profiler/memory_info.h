// A device's memory for its profile: residency::read_memory_status (the one reader of
// available memory, cgroup-aware) in the profile's terms, so that the planner counts memory
// as the runtime does.
#pragma once

#include <cstdint>
#include <string>

#include "hearth/residency/memory_status.h"

namespace hearth::profiler {

struct MemoryInfo {
  uint64_t total_bytes = 0;         // min(MemTotal, tightest cgroup limit)
  uint64_t available_bytes = 0;     // the paper's: free plus reclaimable file cache
  uint64_t swap_free_bytes = 0;     // SwapFree, narrowed by a v2 memory.swap.max
  uint64_t anon_bytes = 0;          // AnonPages: anonymous memory of every process (swappable)
  uint64_t cgroup_limit_bytes = 0;  // 0: no cgroup limit found
  std::string source;               // "meminfo", "cgroup v1 /path", "cgroup v2 /path"
};

using residency::MemoryRoots;

// Throws as residency::read_memory_status does: IoError when the meminfo file cannot be
// read, FormatError naming the file when it or a cgroup's limit or usage file is malformed.
MemoryInfo read_memory_info(const MemoryRoots& roots = {});

}  // namespace hearth::profiler
