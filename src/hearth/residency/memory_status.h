// Available memory as this process sees it, cgroup-aware: a container's limit is its memory.
//
// Order of sources: the memory cgroup of this process (v1: memory.limit_in_bytes,
// memory.usage_in_bytes and memory.stat; v2: memory.max, memory.current and memory.stat) when
// it has a limit below the machine's RAM, else /proc/meminfo.
//
// Two figures, because a cgroup's usage counts the page cache charged to it (our mmapped
// weights among it), which the kernel reclaims before other apps feel any pressure:
// - `available`, the paper's figure (prima.cpp v2: other apps keep their memory): memory that
//   is free or reclaimable file cache. cgroup: limit - usage + file pages of the cgroup;
//   no cgroup: MemAvailable (which already counts reclaimable cache). Clamped to [0, total].
// - `available_unreclaimed`, the old figure: cgroup: limit - usage (page cache counted as
//   used, so it falls as weights are read in); no cgroup: MemFree.
//
// Memory pressure (issue 4, issue 16) = drop of available memory since a baseline over total.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hearth::residency {

struct MemoryStatus {
  uint64_t total = 0;      // bytes: the cgroup limit, or MemTotal
  uint64_t available = 0;  // bytes, the paper's: limit - usage + file_bytes, or MemAvailable
  std::string source;      // "cgroup v1 /path", "cgroup v2 /path" or "meminfo"
  uint64_t available_unreclaimed = 0;  // bytes: limit - usage, or MemFree
  // bytes of reclaimable file pages: cgroup: the file pages counted into `available`
  // (memory.stat); meminfo: Active(file) + Inactive(file), for information (MemAvailable
  // already counts the reclaimable part).
  uint64_t file_bytes = 0;
  // bytes of file pages mapped into some process right now (memory.stat mapped_file /
  // file_mapped, or Mapped): counted in `available` but mostly hot (code in use), so a
  // planner that must not lose its pages to them should not count on them.
  uint64_t mapped_file_bytes = 0;
};

// Reads the status now. Throws IoError when not even /proc/meminfo can be read.
MemoryStatus read_memory_status();

// The paper's pressure: (base.available - now.available) / now.total, clamped to [0, 1].
double memory_pressure(const MemoryStatus& base, const MemoryStatus& now);
// The same with `available_unreclaimed` (page cache counted as used): the old figure.
double memory_pressure_unreclaimed(const MemoryStatus& base, const MemoryStatus& now);

// Parsers, exposed for tests. Values in bytes; nullopt when the field is missing or bad.
std::optional<uint64_t> meminfo_field(std::string_view meminfo, std::string_view key);
// The cgroup path of the v1 "memory" controller (v1 = true) or of the v2 unified hierarchy
// (the "0::" line) in the text of /proc/self/cgroup.
std::optional<std::string> cgroup_path(std::string_view proc_self_cgroup, bool v1);
// A cgroup limit file's value: a decimal number, or "max" (v2) meaning no limit (nullopt).
std::optional<uint64_t> parse_limit(std::string_view text);
// One "key value" line of a cgroup's memory.stat.
std::optional<uint64_t> memory_stat_field(std::string_view memory_stat, std::string_view key);
// The file pages of a cgroup in the text of its memory.stat. v1: total_inactive_file +
// total_active_file (the subtree, as usage_in_bytes charges it), else inactive_file +
// active_file, else cache. v2: file, else inactive_file + active_file. nullopt when none.
std::optional<uint64_t> memory_stat_file_bytes(std::string_view memory_stat, bool v1);

}  // namespace hearth::residency
