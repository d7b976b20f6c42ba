// Q6_K row-interleaved kernel for AArch64, written once over a `Sets` policy and compiled by
// rows16_q6_k_neon.cpp (baseline Advanced SIMD) and rows16_q6_k_dotprod.cpp (SDOT). Per
// 16-element group and quad, three 16-byte vectors hold the group's quants of the quad's 4
// rows (layout in rows16_kernels.h): sets 0-2 whole in the low 6 bits (one mask each), set 3
// in the top bit pairs of all three (two shift-inserts and a shift gather them).
// Sets::dot(corr, q, aq) returns per row corr + sum_k sum_e q[k][4r + e] * aq[4k + e], exact
// in int32. The int8 group scale multiplies lane-wise; the float step is the scalar
// reference's (kRows16Q6_KScalar), per lane: same bits.
#pragma once

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_neon.h"

namespace hearth::quant {
namespace {

template <typename Sets>
struct Rows16Q6_KNeon {
  // One prefetch per 64-byte line consumed, this far ahead (not measured: no ARM hardware
  // here; the distance the x86 Q6_K kernels use).
  static constexpr int kPrefetchBytes = 2048;

  // The 6-bit quants (0..63) of one group of a quad's 4 rows, set k in q[k].
  [[gnu::always_inline]] static void unpack(const uint8_t* v, int8x16_t (&q)[4]) {
    const uint8x16_t six = vdupq_n_u8(0x3f);
    const uint8x16_t v0 = vld1q_u8(v), v1 = vld1q_u8(v + 64), v2 = vld1q_u8(v + 128);
    q[0] = vreinterpretq_s8_u8(vandq_u8(v0, six));
    q[1] = vreinterpretq_s8_u8(vandq_u8(v1, six));
    q[2] = vreinterpretq_s8_u8(vandq_u8(v2, six));
    // Bits 7-6 of v2 shifted to bits 5-4, then those of v1 and v0 shifted into bits 3-2 and
    // 1-0 (a shift-right-insert keeps the destination's bits above the ones it inserts).
    const uint8x16_t top = vsriq_n_u8(vsriq_n_u8(vshrq_n_u8(v2, 2), v1, 4), v0, 6);
    q[3] = vreinterpretq_s8_u8(top);
  }

  template <int NT>
  [[gnu::always_inline]] static void block(const uint8_t* g, Rows16NeonActs<NT> ab,
                                           Rows16NeonAcc<NT>& acc) {
    constexpr int Q = kRows16NeonQuads<NT>;
#pragma GCC unroll 4
    for (int q0 = 0; q0 < 4; q0 += Q) {
      int32x4_t s[NT][Q];  // per token and quad: sum_g sc[g] * (corr[g] + group products)
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) s[t][k] = vdupq_n_s32(0);
      }
      for (int grp = 0; grp < 16; ++grp) {
        const uint8_t* v = g + 288 + 192 * grp;
        if (q0 == 0) {
#pragma GCC unroll 4
          for (int i = 0; i < 3; ++i) __builtin_prefetch(v + 64 * i + kPrefetchBytes);
          // The super-block's header (d and scales, 4.5 lines).
          if (grp < 5) __builtin_prefetch(g + 64 * grp + kPrefetchBytes);
        }
        int8x16_t q[Q][4];
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) unpack(v + 16 * (q0 + k), q[k]);
        int32x4_t sc[Q];
        rows16_neon_widen_s8(g + 32 + 16 * grp + 4 * q0, sc);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 80 + 16 * grp;
          const int32x4_t corr = vdupq_n_s32(rows16_load_i32(ab[t] + 16 + 4 * grp));
#pragma GCC unroll 4
          for (int k = 0; k < Q; ++k) {
            s[t][k] = vmlaq_s32(s[t][k], sc[k], Sets::dot(corr, q[k], aq));
          }
        }
      }
      rows16_neon_scale_quads<NT, Q>(g, q0, ab, s, acc);
    }
  }
};

}  // namespace
}  // namespace hearth::quant
