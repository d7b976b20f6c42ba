// Q4_0 row-interleaved kernel for AArch64, written once over a `Nibbles` policy and compiled
// by rows16_q4_0_neon.cpp (baseline Advanced SIMD) and rows16_q4_0_dotprod.cpp (SDOT), on the
// shared block loop of rows16_neon.h. A block column is 4 slices of 4 quads: a 16-byte vector
// holds 4 GGUF quant bytes of each row of a quad (layout in rows16_kernels.h), its low nibbles
// elements 4s .. 4s + 3, its high nibbles 16 + 4s .. 16 + 4s + 3.
// Nibbles::sums<NT, Q>(qv, aq, isum) adds, for the Q quads at qv and each token t, each row's
// 32 products against the activation quants at aq[t] into isum[t][k], exact in int32. isum
// starts at the block's -8 * sum(a) correction, so it ends at the scalar reference's integer
// sum, and the float steps are the reference's quad steps (kBlockQuads, Rows16NeonBlocks), per
// lane: same bits.
#pragma once

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_neon.h"

namespace hearth::quant {
namespace {

// The nibbles (0..15, valid signed bytes) of the 16 bytes at v: elements 4s .. 4s + 3 of each
// row in lo, elements 16 + 4s .. 16 + 4s + 3 in hi.
[[gnu::always_inline]] inline void rows16_q4_0_nibbles(const uint8_t* v, int8x16_t& lo,
                                                       int8x16_t& hi) {
  const uint8x16_t w = vld1q_u8(v);
  lo = vreinterpretq_s8_u8(vandq_u8(w, vdupq_n_u8(0x0f)));
  hi = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
}

template <typename Nibbles>
struct Rows16Q4_0Neon {
  // block adds into the sums of the quad of block columns at hand (Rows16NeonBlocks).
  static constexpr bool kBlockQuads = true;
  // One prefetch per 64-byte line consumed, this far ahead (not measured: no ARM hardware
  // here; the distance the other AArch64 rows16 kernels use).
  static constexpr int kPrefetchBytes = 2048;

  // Quads per pass. A block's chains are short (4 slices), so with 1 or 2 tokens the quads
  // give the independent multiply-add chains: all 4 quads for one token, 2 for two. With 3
  // or 4 tokens the tokens do, one quad at a time (more would spill registers).
  template <int NT>
  static constexpr int kQuads = NT <= 2 ? 4 / NT : 1;

  template <int NT>
  [[gnu::always_inline]] static void block(const uint8_t* g, Rows16NeonActs<NT> ab,
                                           Rows16NeonAcc<NT>& qsum) {
    constexpr int Q = kQuads<NT>;
    // A block column is 288 bytes (4.5 lines): 5 prefetches cover it.
#pragma GCC unroll 8
    for (int i = 0; i < 5; ++i) __builtin_prefetch(g + 64 * i + kPrefetchBytes);
    const uint8_t* aq[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) aq[t] = ab[t] + 8;
#pragma GCC unroll 4
    for (int q0 = 0; q0 < 4; q0 += Q) {
      int32x4_t isum[NT][Q];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const int32x4_t corr = vdupq_n_s32(rows16_load_i32(ab[t] + 4));
#pragma GCC unroll 4
        for (int k = 0; k < Q; ++k) isum[t][k] = corr;
      }
      Nibbles::template sums<NT, Q>(g + 32 + 16 * q0, aq, isum);
      rows16_neon_scale_quads<NT, Q>(g, q0, ab, isum, qsum);
    }
  }
};

template <typename Nibbles>
using Rows16Q4_0NeonBlocks = Rows16NeonBlocks<Rows16Q4_0Neon<Nibbles>, Rows16Q4_0>;

}  // namespace
}  // namespace hearth::quant
