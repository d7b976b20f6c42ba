// The float steps of four rows at once, for the x86 four-row decode kernels
// (PreparedDot::dot_rows4): a kernel forms each row's step operands in vectors (lane l: step
// l, block_steps.h's order), and the four rows' vectors are transposed so that one fma takes
// step l of all four rows, lane r being row r's. _mm_fmadd_ps rounds once per lane, as
// std::fma does, so every row keeps the bits of its one-row kernel. Where one row's scalar
// steps follow each other, they were a large share of a GGUF-layout decode kernel's time on
// weights in cache (docs/kernels.md, "Four rows a call"). In an unnamed namespace, as
// x86_dot_common.h, so that each kernel file keeps its own copy.
#pragma once

#include <immintrin.h>

namespace hearth::quant {
namespace {

// t[l], lane r = lane l of m[r]: four rows' 8-lane vectors transposed.
[[gnu::always_inline]] inline void transpose_rows4x8(const __m256 (&m)[4], __m128 (&t)[8]) {
  const __m256 a = _mm256_unpacklo_ps(m[0], m[1]);  // rows 0, 1 of lanes 0, 1 | 4, 5
  const __m256 b = _mm256_unpackhi_ps(m[0], m[1]);  // rows 0, 1 of lanes 2, 3 | 6, 7
  const __m256 c = _mm256_unpacklo_ps(m[2], m[3]);
  const __m256 d = _mm256_unpackhi_ps(m[2], m[3]);
  const __m256 l04 = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 l15 = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 l26 = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 l37 = _mm256_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2));
  t[0] = _mm256_castps256_ps128(l04);
  t[1] = _mm256_castps256_ps128(l15);
  t[2] = _mm256_castps256_ps128(l26);
  t[3] = _mm256_castps256_ps128(l37);
  t[4] = _mm256_extractf128_ps(l04, 1);
  t[5] = _mm256_extractf128_ps(l15, 1);
  t[6] = _mm256_extractf128_ps(l26, 1);
  t[7] = _mm256_extractf128_ps(l37, 1);
}

// Lane r of acc after Steps (at most 8) steps acc = fma(factors[r][l], sums[r][l], acc).
template <int Steps>
[[gnu::always_inline]] inline __m128 fma_steps_rows4(__m128 acc, const __m256 (&factors)[4],
                                                     const __m256 (&sums)[4]) {
  __m128 f[8], s[8];
  transpose_rows4x8(factors, f);
  transpose_rows4x8(sums, s);
#pragma GCC unroll 8
  for (int l = 0; l < Steps; ++l) acc = _mm_fmadd_ps(f[l], s[l], acc);
  return acc;
}

}  // namespace
}  // namespace hearth::quant
