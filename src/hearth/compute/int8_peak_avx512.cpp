// The int8 peak probe's loop for AVX-512 VNNI (see int8_peak.h).
#include <immintrin.h>

#include "hearth/compute/int8_peak.h"

namespace hearth::compute::detail {

// Ten independent vpdpbusd chains (latency ~5 cycles) keep every port that runs it busy. The
// volatile asm statements take the operands and accumulators, so the compiler can neither
// hoist, fold nor drop the chains.
uint64_t int8_dot_loop_avx512(int64_t iterations) {
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-5);
  asm volatile("" : "+v"(a), "+v"(b));
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0;
  for (int64_t i = 0; i < iterations; ++i) {
    c0 = _mm512_dpbusd_epi32(c0, a, b);
    c1 = _mm512_dpbusd_epi32(c1, a, b);
    c2 = _mm512_dpbusd_epi32(c2, a, b);
    c3 = _mm512_dpbusd_epi32(c3, a, b);
    c4 = _mm512_dpbusd_epi32(c4, a, b);
    c5 = _mm512_dpbusd_epi32(c5, a, b);
    c6 = _mm512_dpbusd_epi32(c6, a, b);
    c7 = _mm512_dpbusd_epi32(c7, a, b);
    c8 = _mm512_dpbusd_epi32(c8, a, b);
    c9 = _mm512_dpbusd_epi32(c9, a, b);
    asm volatile(""
                 : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7),
                   "+v"(c8), "+v"(c9));
  }
  return static_cast<uint64_t>(iterations) * 10 * 64;  // 64 multiply-adds per vpdpbusd
}

}  // namespace hearth::compute::detail
