#include "hearth/residency/memory_status.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "hearth/base/error.h"

namespace hearth::residency {
namespace {

namespace fs = std::filesystem;

// v1 writes "no limit" as LONG_MAX rounded down to a page; anything this large is unlimited.
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

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

// Takes the next line off `rest` into `line`; false when no text is left.
bool next_line(std::string_view& rest, std::string_view& line) {
  if (rest.empty()) return false;
  const size_t eol = std::min(rest.find('\n'), rest.size());
  line = rest.substr(0, eol);
  rest.remove_prefix(std::min(eol + 1, rest.size()));
  return true;
}

// The trimmed text after "<key><sep>" on the first line that starts so (whole keys only).
std::optional<std::string_view> keyed_value(std::string_view text, std::string_view key, char sep) {
  std::string_view line;
  while (next_line(text, line)) {
    if (line.size() > key.size() && line[key.size()] == sep && line.substr(0, key.size()) == key)
      return trim(line.substr(key.size() + 1));
  }
  return std::nullopt;
}

// A meminfo value, "<n> kB" or a bare "<n>", in bytes.
std::optional<uint64_t> meminfo_bytes(std::string_view v) {
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

std::optional<uint64_t> sum(std::optional<uint64_t> a, std::optional<uint64_t> b) {
  if (!a || !b || *a > UINT64_MAX - *b) return std::nullopt;
  return *a + *b;
}

uint64_t minus(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

// A cgroup file of one number: nullopt when absent, UINT64_MAX for "max" or a number too large
// for 64 bits (no limit in practice); anything else is a FormatError naming the file.
std::optional<uint64_t> read_cgroup_number(const fs::path& path) {
  const auto text = slurp(path.string());
  if (!text) return std::nullopt;
  const std::string_view v = trim(*text);
  if (v == "max") return UINT64_MAX;
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (p == v.data() + v.size() && ec == std::errc::result_out_of_range) return UINT64_MAX;
  if (v.empty() || ec != std::errc() || p != v.data() + v.size()) {
    throw FormatError(
        fmt::format("{}: expected a number or 'max', got '{}'", path.string(), v.substr(0, 40)));
  }
  return n;
}

// One level of the cgroup tree, as the reader narrows the host's figures by it.
struct Level {
  uint64_t limit = UINT64_MAX;
  uint64_t usage = 0;
  uint64_t file = 0;    // reclaimable file pages charged to it
  uint64_t mapped = 0;  // of those, mapped into some process
  uint64_t swap_limit = UINT64_MAX, swap_usage = 0;
};

Level read_level(const fs::path& dir, bool v1) {
  Level l;
  l.limit =
      read_cgroup_number(dir / (v1 ? "memory.limit_in_bytes" : "memory.max")).value_or(UINT64_MAX);
  // Usage and memory.stat matter only under a limit (narrow() skips a level without one), and
  // memory.stat is the costly file: the runtime reads the status once per step.
  if (l.limit < kUnlimited) {
    l.usage =
        read_cgroup_number(dir / (v1 ? "memory.usage_in_bytes" : "memory.current")).value_or(0);
    if (const auto stat = slurp((dir / "memory.stat").string())) {
      l.file = memory_stat_file_bytes(*stat, v1).value_or(0);
      l.mapped = memory_stat_field(*stat, v1 ? "mapped_file" : "file_mapped").value_or(0);
    }
  }
  if (!v1) {
    l.swap_limit = read_cgroup_number(dir / "memory.swap.max").value_or(UINT64_MAX);
    l.swap_usage = read_cgroup_number(dir / "memory.swap.current").value_or(0);
  }
  return l;
}

// The cgroup directory of `rel` under `root` and its ancestors up to (and including) the root.
std::vector<fs::path> cgroup_chain(const fs::path& root, const std::string& rel) {
  fs::path dir = root;
  if (const auto r = fs::path(rel).relative_path(); !r.empty() && fs::exists(root / r)) {
    dir = root / r;
  }  // else a namespaced mount: the root is our cgroup
  std::vector<fs::path> out;
  const auto root_s = root.lexically_normal().string();
  for (fs::path d = dir.lexically_normal();; d = d.parent_path()) {
    out.push_back(d);
    if (d.string().size() <= root_s.size() || !d.has_parent_path() || d == d.parent_path()) break;
  }
  return out;
}

// Narrows the host's figures in `s` by one level of the process's cgroup tree.
void narrow(MemoryStatus& s, const Level& l, const std::string& source) {
  if (l.swap_limit < kUnlimited)
    s.swap_free = std::min(s.swap_free, minus(l.swap_limit, l.swap_usage));
  if (l.limit >= kUnlimited) return;
  s.cgroup_limit = s.cgroup_limit == 0 ? l.limit : std::min(s.cgroup_limit, l.limit);
  if (l.limit < s.total) {
    s.total = l.limit;
    s.source = source;
  }
  s.available_unreclaimed = std::min(s.available_unreclaimed, minus(l.limit, l.usage));
  // The kernel reclaims the cgroup's file pages before it hits the limit; usage is
  // approximate, so the file pages may exceed it.
  const uint64_t room = minus(l.limit, minus(l.usage, l.file));
  if (room < s.available) {
    s.available = room;
    s.file_bytes = l.file;
    s.mapped_file_bytes = l.mapped;
  }
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
  const auto v = keyed_value(meminfo, key, ':');
  return v ? meminfo_bytes(*v) : std::nullopt;
}

std::optional<uint64_t> memory_stat_field(std::string_view stat, std::string_view key) {
  const auto v = keyed_value(stat, key, ' ');
  return v ? parse_limit(*v) : std::nullopt;
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
  std::string_view line;
  while (next_line(text, line)) {
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

MemoryStatus read_memory_status(const MemoryRoots& roots) {
  const auto meminfo = slurp(roots.meminfo);
  if (!meminfo) throw IoError(fmt::format("{}: cannot read", roots.meminfo));
  // A line that is absent is nullopt; one whose value is not a number is an error.
  const auto field = [&](std::string_view key) -> std::optional<uint64_t> {
    const auto v = keyed_value(*meminfo, key, ':');
    if (!v) return std::nullopt;
    if (const auto bytes = meminfo_bytes(*v)) return bytes;
    throw FormatError(fmt::format("{}: {}: expected a number of kB, got '{}'", roots.meminfo, key,
                                  v->substr(0, 40)));
  };
  const auto total = field("MemTotal");
  if (!total) throw FormatError(fmt::format("{}: no MemTotal line", roots.meminfo));
  // MemAvailable counts reclaimable cache already; kernels before 3.14 lack it.
  const auto free = field("MemFree");
  auto available = field("MemAvailable");
  if (!available) available = free;
  if (!available)
    throw FormatError(fmt::format("{}: no MemAvailable line (nor MemFree)", roots.meminfo));
  MemoryStatus s;
  s.total = *total;
  s.available = std::min(*total, *available);
  s.available_unreclaimed = std::min(*total, free.value_or(0));
  s.file_bytes = sum(field("Active(file)"), field("Inactive(file)")).value_or(0);
  s.mapped_file_bytes = field("Mapped").value_or(0);
  s.swap_free = field("SwapFree").value_or(0);
  s.anon_bytes = field("AnonPages").value_or(0);
  s.source = "meminfo";

  const auto self = slurp(roots.self_cgroup);
  if (!self) return s;
  const fs::path root(roots.cgroup_root);
  const auto v1_path = cgroup_path(*self, true);
  const bool v1 = v1_path && fs::exists(root / "memory");
  const auto path = v1 ? v1_path : cgroup_path(*self, false);
  if (!path) return s;
  const std::string source = (v1 ? "cgroup v1 " : "cgroup v2 ") + *path;
  for (const auto& dir : cgroup_chain(v1 ? root / "memory" : root, *path)) {
    narrow(s, read_level(dir, v1), source);
  }
  return s;
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
