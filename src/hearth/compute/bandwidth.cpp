#include "hearth/compute/bandwidth.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "hearth/base/error.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

namespace {

// 16-byte vectors through GCC's generic vector extension: baseline SSE2 / NEON loads, for
// CPUs without the wider loops.
typedef uint64_t u64x2 __attribute__((vector_size(16)));

uint64_t read_stream_generic(const uint8_t* p, size_t bytes) {
  const auto* v = reinterpret_cast<const u64x2*>(p);
  const size_t n = bytes / sizeof(u64x2);
  u64x2 a0{}, a1{}, a2{}, a3{};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __builtin_prefetch(p + i * sizeof(u64x2) + 1024, 0, 3);
    a0 += v[i];
    a1 += v[i + 1];
    a2 += v[i + 2];
    a3 += v[i + 3];
  }
  const u64x2 s = (a0 + a1) + (a2 + a3);
  uint64_t tail = 0;
  for (i *= sizeof(u64x2); i < bytes; ++i) tail += p[i];
  return s[0] + s[1] + tail;
}

using ReadFn = uint64_t (*)(const uint8_t*, size_t);

ReadFn pick_read_loop() {
#if defined(__x86_64__)
  // The widest loads the kernels use: a narrower loop reads fewer bytes per second than they
  // do and would under-state the roofline.
  const quant::Isa isa = quant::active_isa();
  if (isa == quant::Isa::kAvx512) return detail::read_stream_avx512;
  if (isa == quant::Isa::kAvx2) return detail::read_stream_avx2;
#endif
  return read_stream_generic;
}

std::atomic<uint64_t> g_sink{0};  // keeps the probe's reads observable

}  // namespace

uint64_t read_stream(const uint8_t* p, size_t bytes) {
  static const ReadFn fn = pick_read_loop();
  return fn(p, bytes);
}

double time_parallel_read(ThreadPool& pool, const void* data, size_t bytes) {
  const auto* base = static_cast<const uint8_t*>(data);
  const size_t nt = static_cast<size_t>(pool.size());
  // Whole 64-byte lines per thread; the last thread takes the remainder.
  const size_t share = (bytes / nt) & ~size_t{63};
  const auto t0 = std::chrono::steady_clock::now();
  pool.run([&](int ti, int) {
    const size_t begin = share * static_cast<size_t>(ti);
    const size_t end = static_cast<size_t>(ti) + 1 == nt ? bytes : begin + share;
    g_sink.fetch_add(read_stream(base + begin, end - begin), std::memory_order_relaxed);
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

namespace {

constexpr size_t kWindow = size_t{64} << 20;

// Bytes per window on a pool of nt threads: each thread's share whole 64-byte lines.
size_t window_bytes(size_t bytes, size_t nt) {
  return ((std::min(kWindow, bytes) / nt) & ~size_t{63}) * nt;
}

}  // namespace

double best_window_read_gbps(ThreadPool& pool, const void* data, size_t bytes) {
  const auto* base = static_cast<const uint8_t*>(data);
  const size_t window = window_bytes(bytes, static_cast<size_t>(pool.size()));
  double best = 0;
  for (size_t at = 0; window > 0 && at + window <= bytes; at += window) {
    best = std::max(
        best, static_cast<double>(window) / time_parallel_read(pool, base + at, window) / 1e9);
  }
  return best;
}

double measure_memory_read_gbps(ThreadPool& pool, size_t bytes, int reps) {
  if (bytes < (size_t{1} << 20) || reps < 1) {
    throw UsageError("measure_memory_read_gbps: need >= 1 MiB and >= 1 rep, got " +
                     std::to_string(bytes) + " bytes, " + std::to_string(reps) + " reps");
  }
  const size_t nt = static_cast<size_t>(pool.size());
  // The buffer is a whole number of windows.
  const size_t window = window_bytes(bytes, nt);
  const size_t share = window / nt;
  const size_t n_windows = std::max<size_t>(1, bytes / window);
  // Huge-page advised like the weights decode streams (model mmap, repacked copies), and
  // untouched here, so the pool threads (not this one) touch the pages first.
  HugeBuffer buf(n_windows * window);
  uint8_t* base = buf.data();
  pool.run([&](int ti, int) {
    for (size_t w = 0; w < n_windows; ++w)
      std::memset(base + w * window + share * static_cast<size_t>(ti), ti + 1, share);
  });
  double best = 0;
  for (int r = 0; r < reps; ++r)
    best = std::max(best, best_window_read_gbps(pool, base, n_windows * window));
  return best;
}

}  // namespace hearth::compute
