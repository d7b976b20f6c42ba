// The int8 peak probe's loop for AVX2 without VNNI (see int8_peak.h): the kernels' idiom,
// vpmaddubsw (u8 x s8 pairs to s16) then vpmaddwd by ones and vpaddd, 32 multiply-adds per
// three instructions.
#include <immintrin.h>

#include "hearth/compute/int8_peak.h"

namespace hearth::compute::detail {

uint64_t int8_dot_loop_avx2(int64_t iterations) {
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
  for (int64_t i = 0; i < iterations; ++i) {
    // Re-hidden every iteration so the loop-invariant products cannot be hoisted.
    asm volatile("" : "+x"(a), "+x"(b));
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(b, a), ones));
    c2 = _mm256_add_epi32(c2, _mm256_madd_epi16(_mm256_maddubs_epi16(a, a), ones));
    c3 = _mm256_add_epi32(c3, _mm256_madd_epi16(_mm256_maddubs_epi16(b, b), ones));
    c4 = _mm256_add_epi32(c4, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
    c5 = _mm256_add_epi32(c5, _mm256_madd_epi16(_mm256_maddubs_epi16(b, a), ones));
    asm volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5));
  }
  return static_cast<uint64_t>(iterations) * 6 * 32;  // 32 multiply-adds per vpmaddubsw
}

}  // namespace hearth::compute::detail
