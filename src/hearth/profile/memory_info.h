// How much memory this process may use: /proc/meminfo, narrowed by the memory cgroup the
// process lives in (a container's limit is its memory). Reads plain files under roots given
// by the caller, so tests point it at a constructed tree.
//
// cgroup v2 (one line "0::/path" in /proc/self/cgroup): memory.max / memory.current /
// memory.stat of <root>/<path> and every ancestor up to <root>; "max" means no limit.
// cgroup v1 (a line "N:...memory...:/path"): memory.limit_in_bytes / memory.usage_in_bytes /
// memory.stat of <root>/memory/<path> and its ancestors (values near 2^63 mean no limit).
// Inside a container the cgroup path printed by the kernel may not exist under the mounted
// root (the mount shows the container's own cgroup); then the root itself is read.
// Available = min(host MemAvailable, min over limited levels of limit - (usage - inactive
// file pages)): the kernel reclaims inactive page cache before it hits the limit.
#pragma once

#include <cstdint>
#include <string>

namespace hearth::profile {

struct MemoryInfo {
  uint64_t total_bytes = 0;         // min(MemTotal, tightest cgroup limit)
  uint64_t available_bytes = 0;     // what can still be mapped without reclaim pressure
  uint64_t swap_free_bytes = 0;     // SwapFree, narrowed by a v2 memory.swap.max
  uint64_t anon_bytes = 0;          // AnonPages: anonymous memory of every process (swappable)
  uint64_t cgroup_limit_bytes = 0;  // 0: no cgroup limit found
  std::string source;               // "meminfo", "cgroup v1 /path", "cgroup v2 /path"
};

struct MemoryRoots {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
};

// Throws IoError when /proc/meminfo cannot be read, FormatError naming the file and line
// when it has no MemTotal / MemAvailable. Missing or unreadable cgroup files are skipped
// (no limit known), malformed numbers in them throw FormatError naming the file.
MemoryInfo read_memory_info(const MemoryRoots& roots = {});

}  // namespace hearth::profile
