// Q4_0 rows16 kernel, baseline Advanced SIMD (see rows16_q4_0_neon.h). Nibbles (0..15) times
// activation bytes (4 at a time, broadcast from a lane of a 16-byte load) through widening
// multiply-adds, low and high nibbles into the same int16 lanes (they share the block's
// scale): each lane takes two products per slice, at most 4 * 2 * 15 * 127 = 15240 over the
// block's 4 slices, and the one pairwise add before widening stays within 30480, so nothing
// wraps. Per 16 weight bytes: a mask and a shift, then per token four widening multiply-adds
// (and two lane broadcasts per slice, shared by the quads of a pass).
#include "hearth/quant/rows16_q4_0_neon.h"

namespace hearth::quant {
namespace {

struct WideningNibbles {
  // Per token and quad: the int16 sums of the quad's rows 0-1 and 2-3 (4 lanes per row, one
  // per byte position).
  template <int NT, int Q>
  using Sums = int16x8_t[NT][Q][2];

  // Slice Lane: its nibbles against activation bytes 4 Lane .. 4 Lane + 3 of al (elements
  // 0..15) and ah (elements 16..31), broadcast from the lane.
  template <int Lane, int NT, int Q>
  [[gnu::always_inline]] static void slice(const uint8_t* qv, const int32x4_t (&al)[NT],
                                           const int32x4_t (&ah)[NT], Sums<NT, Q>& sum) {
    int8x16_t wl[Q], wh[Q];
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) rows16_q4_0_nibbles(qv + 64 * Lane + 16 * k, wl[k], wh[k]);
    rows16_neon_nibble_products<Lane, 0>(wl, wh, al, ah, sum);
  }

  template <int NT, int Q>
  [[gnu::always_inline]] static void sums(const uint8_t* qv, const uint8_t* const (&aq)[NT],
                                          int32x4_t (&isum)[NT][Q]) {
    // A block's passes (rows16_q4_0_neon.h) form one basic block. Left to itself GCC 12
    // computes the broadcasts once for all passes and loads the later passes' weights early,
    // and spills; a memory barrier at the start of each pass keeps its loads, and what is
    // computed from them, in the pass. (SDOT has no broadcasts and keeps the activation in
    // registers across passes, which the barrier would undo.)
    asm volatile("" ::: "memory");
    int32x4_t al[NT], ah[NT];
    Sums<NT, Q> sum;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      al[t] = vreinterpretq_s32_u8(vld1q_u8(aq[t]));
      ah[t] = vreinterpretq_s32_u8(vld1q_u8(aq[t] + 16));
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) sum[t][k][0] = sum[t][k][1] = vdupq_n_s16(0);
    }
    slice<0>(qv, al, ah, sum);
    slice<1>(qv, al, ah, sum);
    slice<2>(qv, al, ah, sum);
    slice<3>(qv, al, ah, sum);
    // Adjacent lanes (a row's byte positions) added in 16 bits, then widened into the row's
    // int32 lane.
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
        isum[t][k] = vpadalq_s16(isum[t][k], vpaddq_s16(sum[t][k][0], sum[t][k][1]));
      }
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_0_dot_neon = rows16_dot<Rows16Q4_0NeonBlocks<WideningNibbles>>;

}  // namespace hearth::quant
