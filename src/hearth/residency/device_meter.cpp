#include "hearth/residency/device_meter.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "hearth/base/clock.h"

namespace hearth::residency {
namespace {

struct Field {
  const char* key;
  double StepStats::*member;
};

constexpr Field kFields[] = {
    {"compute_ms", &StepStats::compute_ms},
    {"comm_ms", &StepStats::comm_ms},
    {"sends", &StepStats::sends},
    {"wait_ms", &StepStats::wait_ms},
    {"major_faults", &StepStats::major_faults},
    {"reload_bytes", &StepStats::reload_bytes},
    {"prefetch_bytes", &StepStats::prefetch_bytes},
    {"release_bytes", &StepStats::release_bytes},
    {"pressure", &StepStats::pressure},
    {"pressure_unreclaimed", &StepStats::pressure_unreclaimed},
    {"disk_bytes", &StepStats::disk_bytes},
    {"stream_bytes", &StepStats::stream_bytes},
    {"read_ms", &StepStats::read_ms},
    {"exposed_ms", &StepStats::exposed_ms},
    {"expert_uses", &StepStats::expert_uses},
    {"expert_reads", &StepStats::expert_reads},
    {"expert_bytes", &StepStats::expert_bytes},
    {"expert_active_bytes", &StepStats::expert_active_bytes},
    {"expert_read_ms", &StepStats::expert_read_ms},
    {"decode", &StepStats::decode},
    {"assigned_bytes", &StepStats::assigned_bytes},
    {"weight_budget_bytes", &StepStats::weight_budget_bytes},
    {"stream_buffer_bytes", &StepStats::stream_buffer_bytes},
};

// Layout fields are not summed: the totals keep the latest.
bool is_layout(double StepStats::*m) {
  return m == &StepStats::assigned_bytes || m == &StepStats::weight_budget_bytes ||
         m == &StepStats::stream_buffer_bytes;
}

uint64_t faults(int who) {
  rusage ru{};
  if (::getrusage(who, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_majflt);
}

}  // namespace

std::vector<std::pair<std::string, double>> to_fields(const StepStats& s) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& f : kFields) out.emplace_back(f.key, s.*f.member);
  return out;
}

StepStats from_fields(std::span<const std::pair<std::string, double>> fields) {
  StepStats s;
  for (const auto& [key, value] : fields) {
    for (const auto& f : kFields) {
      if (key != f.key) continue;
      s.*f.member = std::isfinite(value) && value > 0 ? value : 0.0;
    }
  }
  s.pressure = std::min(s.pressure, 1.0);
  s.pressure_unreclaimed = std::min(s.pressure_unreclaimed, 1.0);
  s.decode = s.decode > 0 ? 1.0 : 0.0;
  return s;
}

void DeviceTotals::add(const StepStats& s) {
  ++steps;
  const bool dec = s.decode > 0;
  if (dec) ++decode_steps;
  for (const auto& f : kFields) {
    if (is_layout(f.member)) {
      sum.*f.member = s.*f.member;
      decode_sum.*f.member = s.*f.member;
      continue;
    }
    sum.*f.member += s.*f.member;
    if (dec) decode_sum.*f.member += s.*f.member;
  }
  pressure_max = std::max(pressure_max, s.pressure);
  pressure_unreclaimed_max = std::max(pressure_unreclaimed_max, s.pressure_unreclaimed);
}

std::optional<uint64_t> process_read_bytes() {
  std::FILE* f = std::fopen("/proc/self/io", "r");
  if (f == nullptr) return std::nullopt;
  char line[128];
  std::optional<uint64_t> out;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "read_bytes: %llu", &v) == 1) {
      out = static_cast<uint64_t>(v);
      break;
    }
  }
  std::fclose(f);
  return out;
}

uint64_t process_major_faults() {
  return faults(RUSAGE_SELF);
}

uint64_t thread_major_faults() {
  return faults(RUSAGE_THREAD);
}

DeviceMeter::DeviceMeter(const MappedPages& pages)
    : pages_(pages), base_(read_memory_status()), read0_(process_read_bytes()) {}

void DeviceMeter::compute_begin(std::span<const ByteRange> ranges, uint64_t foreign_faults) {
  step_.reload_bytes +=
      static_cast<double>(pages_.span_bytes(ranges) - pages_.resident_bytes(ranges));
  foreign0_ = foreign_faults;
  faults0_ = process_major_faults();
  t0_ = now_ms();
}

void DeviceMeter::compute_end(uint64_t foreign_faults) {
  step_.compute_ms += now_ms() - t0_;
  const uint64_t all = process_major_faults() - faults0_;
  const uint64_t foreign = foreign_faults - foreign0_;
  step_.major_faults += static_cast<double>(all > foreign ? all - foreign : 0);
}

StepStats DeviceMeter::finish_step(bool decode) {
  const MemoryStatus now = read_memory_status();
  step_.pressure = memory_pressure(base_, now);
  step_.pressure_unreclaimed = memory_pressure_unreclaimed(base_, now);
  const auto read = process_read_bytes();
  if (read && read0_) step_.disk_bytes = static_cast<double>(*read - *read0_);
  read0_ = read;
  step_.decode = decode ? 1.0 : 0.0;
  step_.assigned_bytes = layout_.assigned;
  step_.weight_budget_bytes = layout_.weight_budget;
  step_.stream_buffer_bytes = layout_.stream_buffer;
  const StepStats s = step_;
  totals_.add(s);
  step_ = StepStats{};
  return s;
}

}  // namespace hearth::residency
