// Q4_K and Q5_K row-interleaved kernel for AArch64, written once over a `Pairs` policy and
// compiled by rows16_q4_k_neon.cpp (baseline Advanced SIMD) and rows16_q4_k_dotprod.cpp
// (SDOT), each for both types. A 16-byte vector holds 4 GGUF quant bytes of each row of a quad
// (layout in rows16_kernels.h); its low nibbles belong to sub-block 2p, its high nibbles to
// 2p + 1. Q5_K's fifth bits come from the high-bit slice of the same elements, placed into
// bit 4 by Rows16Q4_KSlices, so the policies see 4- or 5-bit quants and nothing else.
// Pairs::pair<NT, Q>(w, aq, lo, hi) gives, for the Q quads of w (a Rows16Q4_KSlices) and each
// token t, the exact int32 sum of each row's 32 products against the activation quants at
// aq[t] (sub-block 2p) and aq[t] + 32 (sub-block 2p + 1). The rest is lane-wise and shared:
// u8 scales multiply the sums, u8 min pairs meet the activation's int16 sub-block sums in
// widening multiply-adds, and the float steps are the scalar reference's
// (rows16_q4_k_block_dot), per lane and in order: same bits.
#pragma once

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_neon.h"

namespace hearth::quant {
namespace {

// One pair's 8 slices of Q quads of a block column: the quant bytes at qp (Q quads 16 bytes
// apart, slices 64 bytes apart) and, for Q5_K (kHighBits >= 0), the pair's high bits at hp:
// one vector per 4 slices, laid out alike, slice s's two bits at 2(s % 4) and 2(s % 4) + 1
// (bits 3 and 4 of sub-block 2p + 1's quants; rows16_kernels.h).
template <int kHighBits, int Q>
struct Rows16Q4_KSlices {
  static constexpr bool kFive = kHighBits >= 0;
  const uint8_t* qp;
  const uint8_t* hp;  // Q5_K only

  // Slice s's quants (0..15, or 0..31 for Q5_K, so valid signed bytes) of sub-block 2p in
  // wl[k] and of 2p + 1 in wh[k], quad k.
  [[gnu::always_inline]] void get(int s, int8x16_t (&wl)[Q], int8x16_t (&wh)[Q]) const {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
      const uint8x16_t w = vld1q_u8(qp + 64 * s + 16 * k);
      uint8x16_t lo, hi;
      if constexpr (kFive) {
        // Sub-block 2p is the byte's bits 0-4; 2p + 1 its bits 5-7 shifted down, with bits 3
        // and 4 from the high-bit byte: a byte shift by 3 - 2(s % 4) (right where negative)
        // brings the slice's two bits there, a mask keeps them alone, and vsri puts bits 5-7
        // of w below them.
        const uint8x16_t h = vld1q_u8(hp + 64 * (s / 4) + 16 * k);
        const uint8x16_t at3 = vshlq_u8(h, vdupq_n_s8(static_cast<int8_t>(3 - 2 * (s % 4))));
        lo = vandq_u8(w, vdupq_n_u8(0x1f));
        hi = vsriq_n_u8(vandq_u8(at3, vdupq_n_u8(0x18)), w, 5);
      } else {
        lo = vandq_u8(w, m4);
        hi = vshrq_n_u8(w, 4);
      }
      wl[k] = vreinterpretq_s8_u8(lo);
      wh[k] = vreinterpretq_s8_u8(hi);
    }
  }
};

// kQuants, kHighBits: where the low 4 bits and Q5_K's high-bit slices start in a block column
// (rows16_kernels.h); kHighBits < 0 for Q4_K.
template <typename Pairs, int kQuants, int kHighBits>
struct Rows16Q4_KNeon {
  static constexpr bool kFive = kHighBits >= 0;
  // One prefetch per 64-byte line, this far ahead (not measured: no ARM hardware here; the
  // distance the x86 Q6_K kernels use). Q5_K takes them too: on x86 its high bits, one vector
  // per four quant vectors, streamed far below the bandwidth on the hardware prefetcher alone
  // and at it with the lines prefetched in order (docs/kernels.md, "Lead lines spread over the
  // loads"); not measured on ARM either.
  static constexpr int kPrefetchBytes = 2048;

  template <int NT>
  [[gnu::always_inline]] static void block(const uint8_t* g, Rows16NeonActs<NT> ab,
                                           Rows16NeonAcc<NT>& acc) {
    constexpr int Q = kRows16NeonQuads<NT>;
#pragma GCC unroll 4
    for (int q0 = 0; q0 < 4; q0 += Q) {
      // Per token and quad: S1 = sum_j sc[j] * (sum over sub-block j). Only S1 is live
      // across the quant loops (S2 follows them), so 4 tokens fit in registers.
      int32x4_t s1[NT][Q];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) s1[t][k] = vdupq_n_s32(0);
      }
      for (int p = 0; p < 4; ++p) {
        const uint8_t* qp = g + kQuants + 512 * p + 16 * q0;
        if (q0 == 0) {
          // A quarter of the block column's lines per pair, in order, header and Q5_K's high
          // bits included (as the x86 kernels spread them over their loads).
          constexpr int kLines = (kQuants + 2048) / 64;
#pragma GCC unroll 12
          for (int l = kLines * p / 4; l < kLines * (p + 1) / 4; ++l)
            __builtin_prefetch(g + 64 * l + kPrefetchBytes);
        }
        const Rows16Q4_KSlices<kHighBits, Q> w{qp,
                                               kFive ? g + kHighBits + 128 * p + 16 * q0 : nullptr};
        const uint8_t* aq[NT];
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) aq[t] = ab[t] + 32 + 64 * p;
        int32x4_t lo[NT][Q], hi[NT][Q];
        Pairs::template pair<NT, Q>(w, aq, lo, hi);
        int32x4_t sc_lo[Q], sc_hi[Q];
        rows16_neon_widen_u8(g + 64 + 32 * p + 4 * q0, sc_lo);
        rows16_neon_widen_u8(g + 64 + 32 * p + 16 + 4 * q0, sc_hi);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
          for (int k = 0; k < Q; ++k) {
            s1[t][k] = vmlaq_s32(vmlaq_s32(s1[t][k], sc_lo[k], lo[t][k]), sc_hi[k], hi[t][k]);
          }
        }
      }
      // S2 = sum_j m[j] * bsum[j]: the min products m[2p] * bsum[2p] and m[2p + 1] *
      // bsum[2p + 1] of a quad's rows 0-1 sit in adjacent lanes of s2[t][k][0], those of rows
      // 2-3 in s2[t][k][1]; one pairwise add at the end gives each row's sum.
      int32x4_t s2[NT][Q][2];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) s2[t][k][0] = s2[t][k][1] = vdupq_n_s32(0);
      }
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        int16x8_t m[Q];  // (m[2p], m[2p + 1]) of each quad's 4 rows, as int16 (at most 63)
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) {
          m[k] = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(g + 192 + 32 * p + 8 * (q0 + k))));
        }
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          // (bsum[2p], bsum[2p + 1]) in every pair of int16 lanes.
          const int16x8_t bs =
              vreinterpretq_s16_s32(vdupq_n_s32(rows16_load_i32(ab[t] + 16 + 4 * p)));
#pragma GCC unroll 4
          for (int k = 0; k < Q; ++k) {
            s2[t][k][0] = vmlal_s16(s2[t][k][0], vget_low_s16(m[k]), vget_low_s16(bs));
            s2[t][k][1] = vmlal_high_s16(s2[t][k][1], m[k], bs);
          }
        }
      }
      // Per row: d * d_a * S1, then - dmin * d_a * S2.
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
        const int q = q0 + k;
        const float32x4_t dw = rows16_neon_f16x4(g + 8 * q);
        const float32x4_t dm = rows16_neon_f16x4(g + 32 + 8 * q);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const float da = rows16_load_f32(ab[t]);
          const int32x4_t s2_rows = vpaddq_s32(s2[t][k][0], s2[t][k][1]);
          acc[t][q] = rows16_neon_fma_scaled(acc[t][q], dw, da, s1[t][k]);
          acc[t][q] = rows16_neon_fms_scaled(acc[t][q], dm, da, s2_rows);
        }
      }
    }
  }
};

// The two layouts' kernels over policy Pairs.
template <typename Pairs>
using Rows16Q4_KNeonBlocks =
    Rows16NeonBlocks<Rows16Q4_KNeon<Pairs, kRows16Q4_KQuants, -1>, Rows16Q4_K>;
template <typename Pairs>
using Rows16Q5_KNeonBlocks =
    Rows16NeonBlocks<Rows16Q4_KNeon<Pairs, kRows16Q5_KQuants, kRows16Q5_KHighBits>, Rows16Q5_K>;

}  // namespace
}  // namespace hearth::quant
