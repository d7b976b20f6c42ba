// Q4_K and Q5_K row-interleaved kernels for AVX2 without VNNI: one row per 32-bit lane, rows
// 0-7 and 8-15 in two 256-bit halves. Quants times activation bytes through vpmaddubsw give
// 16-bit pair sums; slices add up in 16 bits before one vpmaddwd by the sub-block's scale (in
// both halves of each row's lane) widens and scales them at once: all 8 of a sub-block for
// Q4_K (nibbles 0..15: at most 8 * 2 * 15 * 128 = 30720), 4 at a time for Q5_K (0..31:
// 4 * 2 * 31 * 128 = 31744). So per 4 quants a sub-block costs a mask (and a shift for the
// high nibbles), a vpmaddubsw and a 16-bit add; Q5_K's five-bit bytes (rows16_kernels.h) cost
// a mask for sub-block 2p, and for 2p + 1 a shift and a mask of the byte's top three bits and
// a shift, a mask and an or of its two bits from the quad's high-bit vector (at bits 2(s % 4)
// and 2(s % 4) + 1). Same integer sums and float steps per lane as the scalar reference
// (rows16_common.h, rows16_q4_k_block_dot), so the same bits.
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (measured here with
// HEARTH_ISA=avx2; no AVX2-only hardware to measure on).
constexpr int kPrefetchBytes = 4096;

// Bits j and j + 1 of every byte of h moved to bits 3 and 4, the rest cleared. Left or right
// 16-bit shifts bring a neighbour byte's bits only into places the mask drops.
[[gnu::always_inline]] inline __m256i bits_to_3(__m256i h, int j, __m256i bits34) {
  const __m256i moved = j <= 3 ? _mm256_slli_epi16(h, 3 - j) : _mm256_srli_epi16(h, j - 3);
  return _mm256_and_si256(moved, bits34);
}

// kQuants, kHighBits: where the low 4 bits and Q5_K's high-bit slices start in a block
// column (rows16_kernels.h); kHighBits < 0 for Q4_K.
template <int kQuants, int kHighBits>
struct Q4_KAvx2 {
  static constexpr bool kFive = kHighBits >= 0;
  static constexpr int kSlicesPer16Bits = kFive ? 4 : 8;
  // Three tokens a pass: each keeps four sums live through a half's quant loops (Q4_K; Q5_K
  // also its two 32-bit ones), and AVX2 has 16 registers; two and four were slower
  // (docs/kernels.md, "AVX2: one half of the rows a pass").
  static constexpr int kMaxTokens = 3;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m5 = _mm256_set1_epi8(0x1f);
  const __m256i m3 = _mm256_set1_epi8(0x07);
  const __m256i bits34 = _mm256_set1_epi8(0x18);

  // The 8 rows' u8 scales at p, each in both 16-bit halves of its 32-bit lane.
  [[gnu::always_inline]] static __m256i scale_pairs(const uint8_t* p) {
    const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
  }

  // Halves H of the 16 rows (Rows16Halves).
  template <int NT, int H>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    constexpr int h0 = Rows16Halves<H>::kBegin, h1 = Rows16Halves<H>::kEnd;
    __m256i s1[NT][2];
    for (int t = 0; t < NT; ++t) s1[t][0] = s1[t][1] = _mm256_setzero_si256();
      // Unrolled: GCC 12 otherwise keeps Q5_K's loops rolled, with the sums copied between
      // registers every turn.
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const uint8_t* qp = g + kQuants + 512 * p;
#pragma GCC unroll 2
      for (int h = h0; h < h1; ++h) {  // rows 8h .. 8h + 7
        // Each row's scales of sub-blocks 2p and 2p + 1 in both 16-bit halves of its lane:
        // vpmaddwd by them widens a 16-bit pair sum and scales it in one step.
        const __m256i sc_lo = scale_pairs(g + 64 + 32 * p + 8 * h);
        const __m256i sc_hi = scale_pairs(g + 64 + 32 * p + 16 + 8 * h);
        __m256i lo16[NT], hi16[NT];  // 16-bit pair sums of sub-blocks 2p, 2p + 1 since widening
        for (int t = 0; t < NT; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qp + 64 * s + 32 * h));
          // The block column's lines in order, one or two per quant load of the first half,
          // header and Q5_K's high bits included, as on AVX-512 (prefetch_ahead there), in
          // each pass.
          if (h == h0) {
            constexpr int kLines = (kQuants + 2048) / 64;
            const int u = 8 * p + s;
            for (int l = kLines * u / 32; l < kLines * (u + 1) / 32; ++l)
              rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * l);
          }
          __m256i lo, hi;
          if constexpr (kFive) {
            const __m256i hb = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(g + kHighBits + 128 * p + 64 * (s / 4) + 32 * h));
            lo = _mm256_and_si256(v, m5);
            hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 5), m3),
                                 bits_to_3(hb, 2 * (s % 4), bits34));
          } else {
            lo = _mm256_and_si256(v, m4);
            hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          }
          for (int t = 0; t < NT; ++t) {
            const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
            lo16[t] = _mm256_add_epi16(
                lo16[t], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(rows16_load_i32(aq))));
            hi16[t] = _mm256_add_epi16(
                hi16[t], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(rows16_load_i32(aq + 32))));
            rows16_keep_chain(lo16[t]);
            rows16_keep_chain(hi16[t]);
          }
          if ((s + 1) % kSlicesPer16Bits == 0) {
            for (int t = 0; t < NT; ++t) {
              s1[t][h] =
                  _mm256_add_epi32(s1[t][h], _mm256_add_epi32(_mm256_madd_epi16(lo16[t], sc_lo),
                                                              _mm256_madd_epi16(hi16[t], sc_hi)));
              rows16_keep_chain(s1[t][h]);
              lo16[t] = hi16[t] = _mm256_setzero_si256();
            }
          }
        }
      }
    }
    // The mins after the quants, so that their sums are not live through the quant loops.
    __m256i s2[NT][2];
    for (int t = 0; t < NT; ++t) s2[t][0] = s2[t][1] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      for (int h = h0; h < h1; ++h) {
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
    for (int h = h0; h < h1; ++h) {
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

Rows16DotKernel* const rows16_q4_k_dot_avx2 =
    rows16_dot<Rows16Blocks<Q4_KAvx2<kRows16Q4_KQuants, -1>, Rows16Q4_K>>;
Rows16DotKernel* const rows16_q5_k_dot_avx2 =
    rows16_dot<Rows16Blocks<Q4_KAvx2<kRows16Q5_KQuants, kRows16Q5_KHighBits>, Rows16Q5_K>>;

}  // namespace hearth::quant
