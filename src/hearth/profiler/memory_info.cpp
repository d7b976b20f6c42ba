#include "hearth/profiler/memory_info.h"

namespace hearth::profiler {

MemoryInfo read_memory_info(const MemoryRoots& roots) {
  const residency::MemoryStatus s = residency::read_memory_status(roots);
  MemoryInfo info;
  info.total_bytes = s.total;
  info.available_bytes = s.available;
  info.swap_free_bytes = s.swap_free;
  info.anon_bytes = s.anon_bytes;
  info.cgroup_limit_bytes = s.cgroup_limit;
  info.source = s.source;
  return info;
}

}  // namespace hearth::profiler
