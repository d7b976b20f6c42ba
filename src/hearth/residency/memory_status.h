// Available memory as this process sees it, cgroup-aware: a container's limit is its memory.
//
// Order of sources: the memory cgroup of this process (v1: memory.limit_in_bytes and
// memory.usage_in_bytes; v2: memory.max and memory.current) when it has a limit below the
// machine's RAM, else /proc/meminfo (MemTotal, MemAvailable). In a cgroup the usage counts
// the page cache charged to it, so available = limit - usage falls as weights are read in.
//
// Memory pressure (issue 4) = drop of available memory since a baseline over total memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hearth::residency {

struct MemoryStatus {
  uint64_t total = 0;      // bytes: the cgroup limit, or MemTotal
  uint64_t available = 0;  // bytes: limit - usage, or MemAvailable
  std::string source;      // "cgroup v1 /path", "cgroup v2 /path" or "meminfo"
};

// Reads the status now. Throws IoError when not even /proc/meminfo can be read.
MemoryStatus read_memory_status();

// (base.available - now.available) / now.total, clamped to [0, 1].
double memory_pressure(const MemoryStatus& base, const MemoryStatus& now);

// Parsers, exposed for tests. Values in bytes; nullopt when the field is missing or bad.
std::optional<uint64_t> meminfo_field(std::string_view meminfo, std::string_view key);
// The cgroup path of the v1 "memory" controller (v1 = true) or of the v2 unified hierarchy
// (the "0::" line) in the text of /proc/self/cgroup.
std::optional<std::string> cgroup_path(std::string_view proc_self_cgroup, bool v1);
// A cgroup limit file's value: a decimal number, or "max" (v2) meaning no limit (nullopt).
std::optional<uint64_t> parse_limit(std::string_view text);

}  // namespace hearth::residency
