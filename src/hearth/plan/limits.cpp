#include "hearth/plan/limits.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "hearth/base/error.h"

namespace hearth::plan {

std::vector<uint32_t> valid_rounds(uint32_t L, size_t members) {
  std::vector<uint32_t> ks;
  for (uint32_t k = 1; k <= L; ++k) {
    if (L % k == 0 && L / k >= members) ks.push_back(k);
  }
  return ks;
}

double memory_budget(const profile::DeviceProfile& d) {
  if (d.gpu.kind == profile::GpuKind::kMetal)
    return static_cast<double>(d.gpu.vram_available_bytes);
  double b = static_cast<double>(d.ram_available_bytes);
  if (d.os == profile::OsClass::kAndroid)
    b += static_cast<double>(std::min(d.swappable_bytes, d.swap_available_bytes));
  return b;
}

uint32_t gpu_window_cap(const Problem& p, size_t m, uint32_t k) {
  const auto& d = p.devices[m];
  if (!d.has_gpu()) return 0;
  const double b_kv =
      p.model.layer_bytes + static_cast<double>(p.model.kv_bytes_per_token) * p.options.ctx;
  double room = static_cast<double>(d.gpu.vram_available_bytes) -
                static_cast<double>(p.model.compute_buffer_gpu);
  if (d.gpu.kind == profile::GpuKind::kMetal && m == 0)
    room -= static_cast<double>(p.model.output_bytes);
  if (room <= 0) return 0;
  // Floor with a hair of slack so a layer that fits exactly is not lost to rounding.
  return static_cast<uint32_t>(std::floor(room / (k * b_kv) * (1.0 + 1e-12)));
}

std::vector<uint32_t> proportional_split(const std::vector<double>& weights, uint32_t total) {
  const size_t M = weights.size();
  if (M == 0 || total < M)
    throw UsageError("cannot split " + std::to_string(total) + " layers over " + std::to_string(M) +
                     " devices");
  std::vector<uint32_t> out(M, 1);
  const uint32_t rest = total - static_cast<uint32_t>(M);
  double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<double> share(M);
  for (size_t i = 0; i < M; ++i)
    share[i] = sum > 0 ? rest * std::max(0.0, weights[i]) / sum : double(rest) / M;
  uint32_t given = 0;
  for (size_t i = 0; i < M; ++i) {
    const auto whole = static_cast<uint32_t>(std::floor(share[i]));
    out[i] += whole;
    given += whole;
  }
  std::vector<size_t> order(M);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return share[a] - std::floor(share[a]) > share[b] - std::floor(share[b]);
  });
  for (size_t i = 0; given < rest; i = (i + 1) % M, ++given) ++out[order[i]];
  return out;
}

}  // namespace hearth::plan
