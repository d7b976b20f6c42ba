// Q4_K row-interleaved kernel for AArch64, written once over a `Nibbles` policy and compiled
// by rows16_q4_k_neon.cpp (baseline Advanced SIMD) and rows16_q4_k_dotprod.cpp (SDOT). A
// 16-byte vector holds 4 GGUF quant bytes of each row of a quad (layout in rows16_kernels.h);
// its low nibbles belong to sub-block 2p, its high nibbles to 2p + 1.
// Nibbles::pair<NT, Q>(qp, aq, lo, hi) gives, for the Q quads at qp (16 bytes apart, 8 slices
// 64 bytes apart) and each token t, the exact int32 sum of each row's 32 products against
// the activation quants at aq[t] (low nibbles) and aq[t] + 32 (high nibbles). The rest is
// lane-wise and shared: u8 scales multiply the sums, u8 min pairs meet the activation's int16
// sub-block sums in widening multiply-adds, and the float steps are the scalar reference's
// (kRows16Q4_KScalar), per lane and in order: same bits.
#pragma once

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_neon.h"

namespace hearth::quant {
namespace {

template <typename Nibbles>
struct Rows16Q4_KNeon {
  // One prefetch per 64-byte line consumed, this far ahead (not measured: no ARM hardware
  // here; the distance the x86 Q6_K kernels use).
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
        const uint8_t* qp = g + 320 + 512 * p + 16 * q0;
        if (q0 == 0) {
#pragma GCC unroll 8
          for (int s = 0; s < 8; ++s) __builtin_prefetch(qp + 64 * s + kPrefetchBytes);
          // The super-block's 5 header lines (d, dmin, scales, mins).
          if (p == 0) {
#pragma GCC unroll 8
            for (int h = 0; h < 5; ++h) __builtin_prefetch(g + 64 * h + kPrefetchBytes);
          }
        }
        const uint8_t* aq[NT];
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) aq[t] = ab[t] + 32 + 64 * p;
        int32x4_t lo[NT][Q], hi[NT][Q];
        Nibbles::template pair<NT, Q>(qp, aq, lo, hi);
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

}  // namespace
}  // namespace hearth::quant
