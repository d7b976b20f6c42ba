#include "hearth/residency/memory_status.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "hearth/base/error.h"

namespace hearth::residency {
namespace {

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> read_value(const std::string& path) {
  auto text = slurp(path);
  if (!text) return std::nullopt;
  return parse_limit(*text);
}

// Limit, usage and file pages of the cgroup at `dir` (files `limit_name`, `usage_name`,
// memory.stat), when limited below `ram`.
std::optional<MemoryStatus> cgroup_status(const std::string& dir, const char* limit_name,
                                          const char* usage_name, bool v1, uint64_t ram,
                                          const std::string& label) {
  const auto limit = read_value(dir + "/" + limit_name);
  const auto usage = read_value(dir + "/" + usage_name);
  if (!limit || !usage || *limit == 0 || *limit >= ram) return std::nullopt;
  const auto stat = slurp(dir + "/memory.stat");
  const uint64_t file = stat ? memory_stat_file_bytes(*stat, v1).value_or(0) : 0;
  MemoryStatus s;
  s.total = *limit;
  s.available_unreclaimed = *limit > *usage ? *limit - *usage : 0;
  s.file_bytes = file;
  if (stat) {
    s.mapped_file_bytes = memory_stat_field(*stat, v1 ? "mapped_file" : "file_mapped").value_or(0);
  }
  // limit - usage + file, in [0, limit] (usage is approximate, file pages may exceed it).
  const uint64_t used = *usage > file ? *usage - file : 0;
  s.available = *limit > used ? *limit - used : 0;
  s.source = label;
  return s;
}

std::optional<uint64_t> sum(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  if (!a || !b || *a > UINT64_MAX - *b) return std::nullopt;
  return *a + *b;
}

}  // namespace

std::optional<uint64_t> parse_limit(std::string_view text) {
  text = trim(text);
  if (text.empty() || text == "max") return std::nullopt;
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> meminfo_field(std::string_view meminfo, std::string_view key) {
  size_t pos = 0;
  while (pos < meminfo.size()) {
    const size_t eol = std::min(meminfo.find('\n', pos), meminfo.size());
    std::string_view line = meminfo.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || line.substr(0, colon) != key) continue;
    std::string_view v = trim(line.substr(colon + 1));
    uint64_t mult = 1;
    if (v.size() > 3 && v.substr(v.size() - 3) == " kB") {
      mult = 1024;
      v = trim(v.substr(0, v.size() - 3));
    }
    uint64_t n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n > UINT64_MAX / mult) return std::nullopt;
    return n * mult;
  }
  return std::nullopt;
}

std::optional<uint64_t> memory_stat_field(std::string_view stat, std::string_view key) {
  size_t pos = 0;
  while (pos < stat.size()) {
    const size_t eol = std::min(stat.find('\n', pos), stat.size());
    const std::string_view line = stat.substr(pos, eol - pos);
    pos = eol + 1;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos || line.substr(0, sp) != key) continue;
    return parse_limit(line.substr(sp + 1));
  }
  return std::nullopt;
}

std::optional<uint64_t> memory_stat_file_bytes(std::string_view stat, bool v1) {
  const auto lists = [&](std::string_view prefix) {
    return sum(memory_stat_field(stat, std::string(prefix) + "inactive_file"),
               memory_stat_field(stat, std::string(prefix) + "active_file"));
  };
  if (v1) {
    if (auto t = lists("total_")) return t;
    if (auto t = lists("")) return t;
    return memory_stat_field(stat, "cache");
  }
  if (auto f = memory_stat_field(stat, "file")) return f;
  return lists("");
}

std::optional<std::string> cgroup_path(std::string_view text, bool v1) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    // hierarchy-id:controller-list:path
    const size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    const size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, c1);
    const std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string_view path = line.substr(c2 + 1);
    if (path.empty() || path.front() != '/') continue;
    if (!v1 && id == "0" && controllers.empty()) return std::string(path);
    if (v1) {
      size_t b = 0;
      while (b <= controllers.size()) {
        const size_t e = std::min(controllers.find(',', b), controllers.size());
        if (controllers.substr(b, e - b) == "memory") return std::string(path);
        b = e + 1;
      }
    }
  }
  return std::nullopt;
}

MemoryStatus read_memory_status() {
  const auto meminfo = slurp("/proc/meminfo");
  const auto total = meminfo ? meminfo_field(*meminfo, "MemTotal") : std::nullopt;
  if (!total) throw IoError("/proc/meminfo: cannot read MemTotal");
  // MemAvailable counts reclaimable cache already; kernels before 3.14 lack it.
  const auto free = meminfo_field(*meminfo, "MemFree").value_or(0);
  MemoryStatus sys;
  sys.total = *total;
  sys.available = std::min(*total, meminfo_field(*meminfo, "MemAvailable").value_or(free));
  sys.available_unreclaimed = std::min(*total, free);
  sys.file_bytes =
      sum(meminfo_field(*meminfo, "Active(file)"), meminfo_field(*meminfo, "Inactive(file)"))
          .value_or(0);
  sys.mapped_file_bytes = meminfo_field(*meminfo, "Mapped").value_or(0);
  sys.source = "meminfo";
  const auto cg = slurp("/proc/self/cgroup");
  if (cg) {
    if (auto p = cgroup_path(*cg, true)) {
      const std::string dir = "/sys/fs/cgroup/memory" + (*p == "/" ? std::string() : *p);
      if (auto s = cgroup_status(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", true,
                                 *total, "cgroup v1 " + *p)) {
        return *s;
      }
    }
    if (auto p = cgroup_path(*cg, false)) {
      const std::string rel = *p == "/" ? std::string() : *p;
      for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        if (auto s = cgroup_status(root + rel, "memory.max", "memory.current", false, *total,
                                   "cgroup v2 " + *p)) {
          return *s;
        }
      }
    }
  }
  return sys;
}

namespace {

double pressure(uint64_t base_available, uint64_t now_available, uint64_t total) {
  if (total == 0 || now_available >= base_available) return 0.0;
  return std::min(1.0,
                  static_cast<double>(base_available - now_available) / static_cast<double>(total));
}

}  // namespace

double memory_pressure(const MemoryStatus& base, const MemoryStatus& now) {
  return pressure(base.available, now.available, now.total);
}

double memory_pressure_unreclaimed(const MemoryStatus& base, const MemoryStatus& now) {
  return pressure(base.available_unreclaimed, now.available_unreclaimed, now.total);
}

}  // namespace hearth::residency
