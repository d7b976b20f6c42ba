#include "hearth/compute/int8_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "hearth/quant/type_traits.h"

namespace hearth::compute {

namespace {

using LoopFn = uint64_t (*)(int64_t);

struct Probe {
  LoopFn loop = nullptr;
  const char* idiom = "";
  int64_t first_iterations = 1 << 14;  // the calibration's first run: a few microseconds
};

Probe pick_probe() {
#if defined(__x86_64__)
  switch (quant::active_isa()) {
    case quant::Isa::kAvx512:
      return {detail::int8_dot_loop_avx512, "vpdpbusd zmm"};
    case quant::Isa::kAvx2:
      return {detail::int8_dot_loop_avx2, "vpmaddubsw+vpmaddwd+vpaddd ymm"};
    default:
      break;
  }
#endif
  return {};
}

// Seconds for every pool thread to run `iterations` of the loop; the MACs done in total.
double time_loop(ThreadPool& pool, LoopFn loop, int64_t iterations, uint64_t& macs) {
  std::atomic<uint64_t> total{0};
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](int, int) { total.fetch_add(loop(iterations), std::memory_order_relaxed); });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  macs = total.load();
  return s;
}

// Calibrates on a short run, then times three runs of about `seconds` and keeps the fastest
// (the one least disturbed by other work on a shared machine).
Int8Peak measure(ThreadPool& pool, const Probe& probe, double seconds) {
  if (probe.loop == nullptr) return {};
  uint64_t macs = 0;
  int64_t iterations = probe.first_iterations;
  double s = time_loop(pool, probe.loop, iterations, macs);
  while (s < seconds / 8) {
    iterations *= 2;
    s = time_loop(pool, probe.loop, iterations, macs);
  }
  iterations =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iterations) * seconds / s));
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    s = time_loop(pool, probe.loop, iterations, macs);
    best = std::max(best, static_cast<double>(macs) / s / 1e9);
  }
  return {best, probe.idiom};
}

}  // namespace

Int8Peak measure_int8_peak(ThreadPool& pool, double seconds) {
  return measure(pool, pick_probe(), seconds);
}

Int8Peak measure_amx_peak(ThreadPool& pool, double seconds) {
#if defined(__x86_64__)
  if (quant::amx_usable())
    return measure(pool, {detail::amx_tile_loop, "tdpbusd, operands in tiles", 1 << 8}, seconds);
#endif
  return {};
}

}  // namespace hearth::compute
