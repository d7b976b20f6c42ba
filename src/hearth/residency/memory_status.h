// Available memory as this process sees it, cgroup-aware: a container's limit is its memory.
// The one reader of available memory: the runtime (pressure, release, KV and load budgets)
// and the profiler (a device's RAM figures for the planner) both call it, so that the plan
// and the run count memory alike.
//
// Sources: /proc/meminfo, narrowed by the memory cgroup of this process and every ancestor of
// it up to the mount root. cgroup v2 (the "0::/path" line of /proc/self/cgroup): memory.max,
// memory.current, memory.stat (and memory.swap.max, memory.swap.current) of <root>/<path>;
// "max" means no limit. cgroup v1 (a line "N:...memory...:/path"): memory.limit_in_bytes,
// memory.usage_in_bytes, memory.stat of <root>/memory/<path>; values near 2^63 mean no limit.
// Inside a container the path the kernel prints may not exist under the mounted root (the
// mount shows the container's own cgroup); then the root itself is read.
//
// Two figures, because a cgroup's usage counts the page cache charged to it (our mmapped
// weights among it), which the kernel reclaims before other apps feel any pressure:
// - `available`, the paper's figure (prima.cpp v2: other apps keep their memory): memory that
//   is free or reclaimable file cache. Host: MemAvailable (which counts the active and inactive
//   file pages, less a reserve); each limited cgroup level: limit - usage + its file pages
//   (active and inactive, as MemAvailable counts them). The smallest of these, in [0, total].
// - `available_unreclaimed`, the old figure: MemFree, narrowed by limit - usage of each
//   limited level (page cache counted as used, so it falls as weights are read in).
//
// Memory pressure (issue 4, issue 16) = drop of available memory since a baseline over total.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hearth::residency {

// Where the reader finds the kernel's files; tests point it at a constructed tree.
struct MemoryRoots {
  std::string meminfo = "/proc/meminfo";
  std::string self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
};

struct MemoryStatus {
  uint64_t total = 0;      // bytes: min(MemTotal, the tightest cgroup limit)
  uint64_t available = 0;  // bytes, the paper's: see above
  // "cgroup v1 /path" or "cgroup v2 /path" when a cgroup limit is below MemTotal, else
  // "meminfo".
  std::string source;
  uint64_t available_unreclaimed = 0;  // bytes: MemFree, narrowed by limit - usage
  // bytes of reclaimable file pages counted into `available` by the source that bounds it:
  // the cgroup's memory.stat, or Active(file) + Inactive(file) of meminfo (for information:
  // MemAvailable already counts the reclaimable part).
  uint64_t file_bytes = 0;
  // bytes of file pages mapped into some process right now (memory.stat mapped_file /
  // file_mapped, or Mapped): counted in `available` but mostly hot (code in use), so a
  // planner that must not lose its pages to them should not count on them.
  uint64_t mapped_file_bytes = 0;
  uint64_t swap_free = 0;     // bytes: SwapFree, narrowed by a v2 memory.swap.max
  uint64_t anon_bytes = 0;    // bytes: AnonPages, anonymous memory of every process
  uint64_t cgroup_limit = 0;  // bytes: the tightest cgroup limit, 0 when none is set
};

// Reads the status now. Throws IoError when the meminfo file cannot be read, FormatError
// naming the file when it has no MemTotal (or neither MemAvailable nor MemFree) or when a
// number in it or in a cgroup's limit or usage file is malformed. Missing cgroup files are
// skipped (no limit known).
MemoryStatus read_memory_status(const MemoryRoots& roots = {});

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
