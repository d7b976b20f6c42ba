#include "hearth/profile/memory_info.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

#include "hearth/base/error.h"

namespace hearth::profile {
namespace {

namespace fs = std::filesystem;

// v1 reports "no limit" as LONG_MAX rounded down to a page; anything this large is unlimited.
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint64_t parse_u64(const std::string& text, const std::string& where) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i == text.size() || text[i] < '0' || text[i] > '9')
    throw FormatError(fmt::format("{}: expected a number, got '{}'", where, text.substr(0, 40)));
  uint64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return UINT64_MAX;  // saturate: "unlimited" in practice
    v = v * 10 + d;
  }
  return v;
}

// A single-number file; nullopt when absent, UINT64_MAX for "max".
std::optional<uint64_t> read_number(const fs::path& p) {
  auto t = read_text(p);
  if (!t) return std::nullopt;
  std::string s = *t;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s == "max") return UINT64_MAX;
  return parse_u64(s, p.string());
}

// `key value` lines (memory.stat); nullopt when the file or key is absent.
std::optional<uint64_t> stat_value(const fs::path& p, const std::string& key) {
  auto t = read_text(p);
  if (!t) return std::nullopt;
  std::istringstream in(*t);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size() + 1, key + " ") == 0)
      return parse_u64(line.substr(key.size() + 1), p.string() + ": " + key);
  }
  return std::nullopt;
}

struct Level {
  uint64_t limit = UINT64_MAX;
  uint64_t usage = 0;
  uint64_t inactive_file = 0;
  uint64_t swap_limit = UINT64_MAX, swap_usage = 0;
};

// The cgroup directory and its ancestors up to (and including) the root.
std::vector<fs::path> chain(const fs::path& root, const std::string& rel) {
  fs::path dir = root;
  if (const auto r = fs::path(rel).relative_path(); !r.empty() && fs::exists(root / r)) {
    dir = root / r;
  }  // else a namespaced mount: the root is our cgroup
  std::vector<fs::path> out;
  const auto root_s = root.lexically_normal().string();
  for (fs::path d = dir.lexically_normal();; d = d.parent_path()) {
    out.push_back(d);
    const auto ds = d.string();
    if (ds.size() <= root_s.size() || !d.has_parent_path() || d == d.parent_path()) break;
  }
  return out;
}

}  // namespace

MemoryInfo read_memory_info(const MemoryRoots& roots) {
  MemoryInfo info;
  const auto meminfo = read_text(roots.meminfo);
  if (!meminfo) throw IoError(fmt::format("{}: cannot read", roots.meminfo));
  std::optional<uint64_t> total, avail, swap_free, anon;
  {
    std::istringstream in(*meminfo);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key = line.substr(0, colon);
      if (key != "MemTotal" && key != "MemAvailable" && key != "SwapFree" && key != "AnonPages")
        continue;
      // Values are in kB ("kB" is the kernel's KiB).
      const uint64_t v =
          parse_u64(line.substr(colon + 1), fmt::format("{} line {} ({})", roots.meminfo, n, key)) *
          1024;
      (key == "MemTotal"       ? total
       : key == "MemAvailable" ? avail
       : key == "SwapFree"     ? swap_free
                               : anon) = v;
    }
  }
  if (!total) throw FormatError(fmt::format("{}: no MemTotal line", roots.meminfo));
  if (!avail) throw FormatError(fmt::format("{}: no MemAvailable line", roots.meminfo));
  info.total_bytes = *total;
  info.available_bytes = std::min(*avail, *total);
  info.swap_free_bytes = swap_free.value_or(0);
  info.anon_bytes = anon.value_or(0);
  info.source = "meminfo";

  const auto cg = read_text(roots.self_cgroup);
  if (!cg) return info;
  std::optional<std::string> v2_path, v1_path;
  {
    std::istringstream in(*cg);
    std::string line;
    while (std::getline(in, line)) {
      const auto a = line.find(':');
      const auto b = a == std::string::npos ? a : line.find(':', a + 1);
      if (b == std::string::npos) continue;
      const std::string ctrl = line.substr(a + 1, b - a - 1);
      const std::string path = line.substr(b + 1);
      if (line.compare(0, a, "0") == 0 && ctrl.empty()) {
        v2_path = path;
      } else {
        std::istringstream cs(ctrl);
        std::string c;
        while (std::getline(cs, c, ','))
          if (c == "memory") v1_path = path;
      }
    }
  }
  const fs::path root(roots.cgroup_root);
  std::vector<std::pair<fs::path, Level>> levels;
  if (v1_path && fs::exists(root / "memory")) {
    info.source = "cgroup v1 " + *v1_path;
    for (const auto& d : chain(root / "memory", *v1_path)) {
      Level l;
      if (auto v = read_number(d / "memory.limit_in_bytes")) l.limit = *v;
      if (auto v = read_number(d / "memory.usage_in_bytes")) l.usage = *v;
      // total_* counts the subtree, which is what usage_in_bytes charges.
      l.inactive_file = stat_value(d / "memory.stat", "total_inactive_file")
                            .value_or(stat_value(d / "memory.stat", "inactive_file").value_or(0));
      levels.emplace_back(d, l);
    }
  } else if (v2_path) {
    info.source = "cgroup v2 " + *v2_path;
    for (const auto& d : chain(root, *v2_path)) {
      Level l;
      if (auto v = read_number(d / "memory.max")) l.limit = *v;
      if (auto v = read_number(d / "memory.current")) l.usage = *v;
      l.inactive_file = stat_value(d / "memory.stat", "inactive_file").value_or(0);
      if (auto v = read_number(d / "memory.swap.max")) l.swap_limit = *v;
      if (auto v = read_number(d / "memory.swap.current")) l.swap_usage = *v;
      levels.emplace_back(d, l);
    }
  } else {
    return info;
  }
  for (const auto& [dir, l] : levels) {
    if (l.limit < kUnlimited) {
      info.cgroup_limit_bytes =
          info.cgroup_limit_bytes == 0 ? l.limit : std::min(info.cgroup_limit_bytes, l.limit);
      info.total_bytes = std::min(info.total_bytes, l.limit);
      const uint64_t working = l.usage > l.inactive_file ? l.usage - l.inactive_file : 0;
      const uint64_t room = l.limit > working ? l.limit - working : 0;
      info.available_bytes = std::min(info.available_bytes, room);
    }
    if (l.swap_limit < kUnlimited) {
      const uint64_t room = l.swap_limit > l.swap_usage ? l.swap_limit - l.swap_usage : 0;
      info.swap_free_bytes = std::min(info.swap_free_bytes, room);
    }
  }
  return info;
}

}  // namespace hearth::profile
