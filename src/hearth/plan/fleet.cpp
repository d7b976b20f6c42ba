#include "hearth/plan/fleet.h"

#include <random>
#include <string>

#include "hearth/base/error.h"

namespace hearth::plan {

std::vector<profile::DeviceProfile> jittered_fleet(const std::vector<profile::DeviceProfile>& base,
                                                   size_t count, uint64_t seed, double jitter) {
  if (base.empty()) throw UsageError("jittered_fleet: no base devices");
  if (jitter < 0 || jitter >= 1) throw UsageError("jittered_fleet: jitter must be in [0, 1)");
  std::vector<profile::DeviceProfile> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    // One generator per device, seeded by (seed, i): device i is the same in every fleet size.
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + i);
    std::uniform_real_distribution<double> factor(1 - jitter, 1 + jitter);
    auto scale = [&](auto& x) {
      x = static_cast<std::remove_reference_t<decltype(x)>>(x * factor(rng));
    };
    auto d = base[i % base.size()];
    d.name += "." + std::to_string(i);
    d.head = i == 0;
    d.reachable.clear();  // every copy reaches every other
    scale(d.ram_available_bytes);
    if (d.ram_available_bytes > d.ram_total_bytes) d.ram_total_bytes = d.ram_available_bytes;
    scale(d.swappable_bytes);
    scale(d.disk_seq_read_bps);
    scale(d.disk_random_read_bps);
    const double cpu = factor(rng);  // one factor for the CPU: its types keep their ratios
    for (auto& [type, f] : d.cpu.flops) f *= cpu;
    scale(d.cpu.mem_read_bps);
    if (d.has_gpu()) {
      const double gpu = factor(rng);
      for (auto& [type, f] : d.gpu.flops) f *= gpu;
      scale(d.gpu.mem_read_bps);
      scale(d.gpu.vram_available_bytes);
      if (d.gpu.vram_available_bytes > d.gpu.vram_total_bytes)
        d.gpu.vram_total_bytes = d.gpu.vram_available_bytes;
    }
    scale(d.link.rtt_s);
    scale(d.link.bandwidth_bps);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace hearth::plan
