// The bandwidth probe's read loop (bandwidth.h), written once over the vector width:
// bandwidth_avx2.cpp and bandwidth_avx512.cpp instantiate it with their ISA's integer vector.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hearth::compute::detail {

// Four independent accumulators keep four line loads in flight per iteration; the software
// prefetch 1 KiB ahead, one per 64-byte line, is the same distance matvec uses, so the probe is
// the best a plain stream gets with that strategy (measured: neither helps nor hurts the plain
// loop here). `Vec` is a vector of kBytes bytes with zero(), load(p), add(a, b) in 64-bit lanes
// and sum(v) of its lanes.
template <class Vec>
uint64_t read_stream_loop(const uint8_t* p, size_t bytes) {
  constexpr size_t kWidth = Vec::kBytes;
  constexpr size_t kStep = 4 * kWidth;
  auto a0 = Vec::zero(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + kStep <= bytes; i += kStep) {
    for (size_t line = 0; line < kStep; line += 64) __builtin_prefetch(p + i + 1024 + line, 0, 3);
    a0 = Vec::add(a0, Vec::load(p + i));
    a1 = Vec::add(a1, Vec::load(p + i + kWidth));
    a2 = Vec::add(a2, Vec::load(p + i + 2 * kWidth));
    a3 = Vec::add(a3, Vec::load(p + i + 3 * kWidth));
  }
  uint64_t tail = 0;
  for (; i < bytes; i += 64) tail += p[i];
  return Vec::sum(Vec::add(Vec::add(a0, a1), Vec::add(a2, a3))) + tail;
}

}  // namespace hearth::compute::detail
