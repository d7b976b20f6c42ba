// The bandwidth probe's read loop (bandwidth.h), written once over the vector width:
// bandwidth_avx2.cpp and bandwidth_avx512.cpp instantiate it with their ISA's integer vector.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth::compute::detail {

// The probe streams the way the fastest decode kernels do (docs/kernels.md, "Software
// prefetch" and "Stores beside the loads"), because a roofline that a kernel can beat is no
// roofline: beside every 64-byte load, one prefetch of the line kPrefetchAhead bytes on, tied
// to the loaded vector (an asm operand, so the compiler cannot gather the prefetches into one
// burst), and one store of the vector to the stack, where nothing reads it. Side by side on
// the AMD EPYC these were tuned on, this loop read a 1 GiB buffer at 2 threads faster than
// the same loop with untied prefetches 1 KiB ahead, or with no prefetches at all, and the tied
// prefetches without the stores did not; before it, the rows16 kernels streamed faster than
// the probe, and decode's ratio to its roofline could pass 1.
constexpr size_t kPrefetchAhead = 3072;

template <class V>
[[gnu::always_inline]] inline void stream_beside(V& v, const uint8_t* ahead) {
  asm volatile("prefetcht0 (%1)" : "+v"(v) : "r"(ahead));
  asm volatile("" : : "m"(v));
}

// Four independent accumulators keep four line loads in flight per iteration. `Vec` is a
// vector of kBytes bytes with zero(), load(p), add(a, b) in 64-bit lanes and sum(v) of its
// lanes.
template <class Vec>
uint64_t read_stream_loop(const uint8_t* p, size_t bytes) {
  constexpr size_t kWidth = Vec::kBytes;
  constexpr size_t kStep = 4 * kWidth;
  auto a0 = Vec::zero(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + kStep <= bytes; i += kStep) {
    auto v0 = Vec::load(p + i), v1 = Vec::load(p + i + kWidth), v2 = Vec::load(p + i + 2 * kWidth),
         v3 = Vec::load(p + i + 3 * kWidth);
    // One prefetch per 64-byte line: every vector of a 512-bit loop, every other of a 256-bit one.
    stream_beside(v0, p + i + kPrefetchAhead);
    if constexpr (kWidth == 64) {
      stream_beside(v1, p + i + kPrefetchAhead + 64);
      stream_beside(v2, p + i + kPrefetchAhead + 128);
      stream_beside(v3, p + i + kPrefetchAhead + 192);
    } else {
      stream_beside(v2, p + i + kPrefetchAhead + 2 * kWidth);
    }
    a0 = Vec::add(a0, v0);
    a1 = Vec::add(a1, v1);
    a2 = Vec::add(a2, v2);
    a3 = Vec::add(a3, v3);
  }
  uint64_t tail = 0;
  for (; i < bytes; i += 64) tail += p[i];
  return Vec::sum(Vec::add(Vec::add(a0, a1), Vec::add(a2, a3))) + tail;
}

}  // namespace hearth::compute::detail
