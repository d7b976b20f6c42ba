#include "hearth/compute/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "hearth/base/error.h"

namespace hearth::compute {

namespace {

// 16-byte vectors through GCC's generic vector extension: baseline SSE2 / NEON loads, wide
// enough that one core's loop issues far more bytes per cycle than DRAM delivers.
typedef uint64_t u64x2 __attribute__((vector_size(16)));

uint64_t read_slice(const uint8_t* p, size_t bytes) {
  const auto* v = reinterpret_cast<const u64x2*>(p);
  const size_t n = bytes / sizeof(u64x2);
  u64x2 a0{}, a1{}, a2{}, a3{};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 += v[i];
    a1 += v[i + 1];
    a2 += v[i + 2];
    a3 += v[i + 3];
  }
  const u64x2 s = (a0 + a1) + (a2 + a3);
  return s[0] + s[1];
}

}  // namespace

double measure_memory_read_gbps(ThreadPool& pool, size_t bytes, int reps) {
  if (bytes < (size_t{1} << 20) || reps < 1) {
    throw UsageError("measure_memory_read_gbps: need >= 1 MiB and >= 1 rep, got " +
                     std::to_string(bytes) + " bytes, " + std::to_string(reps) + " reps");
  }
  const int nt = pool.size();
  constexpr size_t kWindow = size_t{64} << 20;
  // Per-thread share of a window, whole 64-byte lines; the buffer is a whole number of windows.
  const size_t share = (std::min(kWindow, bytes) / static_cast<size_t>(nt)) & ~size_t{63};
  const size_t window = share * static_cast<size_t>(nt);
  const size_t n_windows = std::max<size_t>(1, bytes / window);
  // Default-initialized, so the pool threads (not this one) touch the pages first.
  std::unique_ptr<u64x2[]> buf(new u64x2[n_windows * window / sizeof(u64x2)]);
  auto* base = reinterpret_cast<uint8_t*>(buf.get());
  pool.run([&](int ti, int) {
    for (size_t w = 0; w < n_windows; ++w)
      std::memset(base + w * window + share * ti, ti + 1, share);
  });
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    for (size_t w = 0; w < n_windows; ++w) {
      const uint8_t* win = base + w * window;
      const auto t0 = std::chrono::steady_clock::now();
      pool.run([&](int ti, int) {
        sink.fetch_add(read_slice(win + share * ti, share), std::memory_order_relaxed);
      });
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, static_cast<double>(window) / s / 1e9);
    }
  }
  if (sink.load() == 42) best += 0;  // keeps the reads observable
  return best;
}

}  // namespace hearth::compute
