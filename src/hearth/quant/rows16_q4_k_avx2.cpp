// Q4_K row-interleaved kernel for AVX2 without VNNI: one row per 32-bit lane, rows 0-7 and
// 8-15 in two 256-bit halves. Nibbles (0..15) times activation bytes through vpmaddubsw give
// 16-bit pair sums of at most 2 * 15 * 127; the 8 slices of a sub-block add up in 16 bits
// (at most 30480) before one vpmaddwd by ones widens them, so a sub-block costs per 4
// quants a mask (and a shift for the high nibbles), a vpmaddubsw and a 16-bit add. Same
// integer sums and float steps per lane as the scalar reference (rows16_q4_k.cpp), so the same
// bits.
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (measured here with
// HEARTH_ISA=avx2; no AVX2-only hardware to measure on).
constexpr int kPrefetchBytes = 4096;

struct Q4_KAvx2 {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);

  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    __m256i s1[NT][2], s2[NT][2];
    for (int t = 0; t < NT; ++t) s1[t][0] = s1[t][1] = s2[t][0] = s2[t][1] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      const uint8_t* qp = g + 320 + 512 * p;
      for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7
        __m256i lo16[NT], hi16[NT];  // 16-bit pair sums of sub-blocks 2p and 2p + 1
        for (int t = 0; t < NT; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qp + 64 * s + 32 * h));
          if (h == 0) {
            rows16_prefetch_beside(v, qp + kPrefetchBytes + 64 * s);
            // The super-block's 5 header lines ride along the first loads.
            if (p == 0 && s < 5) rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * s);
          }
          const __m256i lo = _mm256_and_si256(v, m4);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          for (int t = 0; t < NT; ++t) {
            const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
            lo16[t] = _mm256_add_epi16(
                lo16[t], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(rows16_load_i32(aq))));
            hi16[t] = _mm256_add_epi16(
                hi16[t], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(rows16_load_i32(aq + 32))));
          }
        }
        const __m256i sc_lo = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 8 * h)));
        const __m256i sc_hi = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 16 + 8 * h)));
        for (int t = 0; t < NT; ++t) {
          s1[t][h] = _mm256_add_epi32(
              s1[t][h],
              _mm256_add_epi32(_mm256_mullo_epi32(sc_lo, _mm256_madd_epi16(lo16[t], ones)),
                               _mm256_mullo_epi32(sc_hi, _mm256_madd_epi16(hi16[t], ones))));
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i m16 = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 192 + 32 * p + 16 * h)));
        for (int t = 0; t < NT; ++t) {
          s2[t][h] = _mm256_add_epi32(
              s2[t][h],
              _mm256_madd_epi16(m16, _mm256_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * p))));
        }
      }
    }
    // Per row: d * d_a * (scaled quant sums) - dmin * d_a * (scaled min sums).
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = Rows16Lanes::f16(g, h);
      const __m256 dm = Rows16Lanes::f16(g + 32, h);
      for (int t = 0; t < NT; ++t) {
        const float da = rows16_load_f32(ab[t]);
        acc[t][h] = Rows16Lanes::fma_scaled(dw, da, s1[t][h], acc[t][h]);
        acc[t][h] = Rows16Lanes::fnma_scaled(dm, da, s2[t][h], acc[t][h]);
      }
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_avx2 = rows16_dot<Rows16Blocks<Q4_KAvx2, Rows16Q4_K>>;

}  // namespace hearth::quant
