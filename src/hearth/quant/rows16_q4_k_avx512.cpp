// Q4_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. A 64-byte load holds 4
// GGUF quant bytes of each of 16 rows; its low nibbles (& 0x0F) belong to sub-block 2p and
// its high nibbles (& 0xF0, i.e. 16x the nibble) to sub-block 2p + 1, each one vpdpbusd
// against the broadcast 4 activation quants; the x16 is shifted out exactly afterwards.
// Scales (u8) and mins (u8 pairs, vpmaddwd against the activation's sub-block sums) apply
// lane-wise. Same integer sums and float steps per lane as the scalar reference (rows16_q4_k.cpp).
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line consumed, this far ahead (rows16_prefetch_beside): side by side at 2
// threads (bench/ab_kernels.sh) 3 KiB streamed better than 4 KiB and 6 KiB.
constexpr int kPrefetchBytes = 3072;

struct Q4_KAvx512 {
  const __m512i m_lo = _mm512_set1_epi8(0x0f);
  const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));

  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    __m512i s1[NT];
    for (int t = 0; t < NT; ++t) s1[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      __m512i lo_sum[NT], hi_sum[NT];  // sub-block 2p, and 16x sub-block 2p + 1
      for (int t = 0; t < NT; ++t) lo_sum[t] = hi_sum[t] = _mm512_setzero_si512();
      const uint8_t* qp = g + 320 + 512 * p;
      for (int s = 0; s < 8; ++s) {
        __m512i v = _mm512_loadu_si512(qp + 64 * s);
        rows16_prefetch_beside(v, qp + kPrefetchBytes + 64 * s);
        rows16_store_beside<NT>(v);
        // The super-block's 5 header lines (scales, mins, d) ride along the first loads.
        if (p == 0 && s < 5) rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * s);
        const __m512i lo = _mm512_and_si512(v, m_lo);
        const __m512i hi = _mm512_and_si512(v, m_hi);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
          lo_sum[t] = _mm512_dpbusd_epi32(lo_sum[t], lo, _mm512_set1_epi32(rows16_load_i32(aq)));
          hi_sum[t] =
              _mm512_dpbusd_epi32(hi_sum[t], hi, _mm512_set1_epi32(rows16_load_i32(aq + 32)));
        }
      }
      const __m512i sc_lo =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 16)));
      for (int t = 0; t < NT; ++t) {
        s1[t] = _mm512_add_epi32(
            s1[t], _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, lo_sum[t]),
                                    _mm512_mullo_epi32(sc_hi, _mm512_srai_epi32(hi_sum[t], 4))));
      }
    }
    __m512i s2[NT];
    for (int t = 0; t < NT; ++t) s2[t] = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i m16 = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 192 + 32 * p)));
      for (int t = 0; t < NT; ++t) {
        s2[t] = _mm512_add_epi32(
            s2[t], _mm512_madd_epi16(m16, _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * p))));
      }
    }
    // Per row: d * d_a * (scaled quant sums) - dmin * d_a * (scaled min sums).
    const __m512 dw = Rows16Lanes::f16(g, 0);
    const __m512 dm = Rows16Lanes::f16(g + 32, 0);
    for (int t = 0; t < NT; ++t) {
      const float da = rows16_load_f32(ab[t]);
      acc[t][0] = Rows16Lanes::fma_scaled(dw, da, s1[t], acc[t][0]);
      acc[t][0] = Rows16Lanes::fnma_scaled(dm, da, s2[t], acc[t][0]);
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_avx512 = rows16_dot<Rows16Blocks<Q4_KAvx512, Rows16Q4_K>>;

}  // namespace hearth::quant
