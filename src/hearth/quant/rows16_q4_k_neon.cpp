// Q4_K rows16 kernel, baseline Advanced SIMD (see rows16_q4_k_neon.h). Nibbles (0..15) times
// activation bytes (4 at a time, broadcast from a lane of a 16-byte load) through widening
// multiply-adds: each int16 lane takes one product per slice, at most 8 * 15 * 127 = 15240
// over a sub-block's 8 slices, and the one pairwise add before widening stays within 30480,
// so nothing wraps. Per 16 weight bytes: a mask and a shift, then per token two lane
// broadcasts and four widening multiply-adds.
#include "hearth/quant/rows16_q4_k_neon.h"

namespace hearth::quant {
namespace {

struct WideningNibbles {
  // Per token and quad: the int16 sums of the low-nibble products of the quad's rows 0-1 and
  // 2-3 (4 lanes per row, one per byte position), then those of the high nibbles.
  template <int NT, int Q>
  using Sums = int16x8_t[NT][Q][4];

  // Slice 4c + Lane: its nibbles against activation bytes 4 Lane .. 4 Lane + 3 of al / ah,
  // broadcast from the lane.
  template <int Lane, int NT, int Q>
  [[gnu::always_inline]] static void slice(const uint8_t* qp, const int32x4_t (&al)[NT],
                                           const int32x4_t (&ah)[NT], Sums<NT, Q>& sum) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    int8x16_t wl[Q], wh[Q];
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
      const uint8x16_t w = vld1q_u8(qp + 64 * Lane + 16 * k);
      wl[k] = vreinterpretq_s8_u8(vandq_u8(w, m4));
      wh[k] = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const int8x16_t bl = vreinterpretq_s8_s32(vdupq_laneq_s32(al[t], Lane));
      const int8x16_t bh = vreinterpretq_s8_s32(vdupq_laneq_s32(ah[t], Lane));
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
        int16x8_t(&x)[4] = sum[t][k];
        x[0] = vmlal_s8(x[0], vget_low_s8(wl[k]), vget_low_s8(bl));
        x[1] = vmlal_high_s8(x[1], wl[k], bl);
        x[2] = vmlal_s8(x[2], vget_low_s8(wh[k]), vget_low_s8(bh));
        x[3] = vmlal_high_s8(x[3], wh[k], bh);
      }
    }
  }

  template <int NT, int Q>
  [[gnu::always_inline]] static void pair(const uint8_t* qp, const uint8_t* const (&aq)[NT],
                                          int32x4_t (&lo)[NT][Q], int32x4_t (&hi)[NT][Q]) {
    Sums<NT, Q> sum;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) sum[t][k][i] = vdupq_n_s16(0);
      }
    }
    // Slices 4c .. 4c + 3 take activation bytes 16c .. 16c + 15 of each sub-block.
    for (int c = 0; c < 2; ++c) {
      int32x4_t al[NT], ah[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        al[t] = vreinterpretq_s32_u8(vld1q_u8(aq[t] + 16 * c));
        ah[t] = vreinterpretq_s32_u8(vld1q_u8(aq[t] + 32 + 16 * c));
      }
      const uint8_t* qc = qp + 256 * c;
      slice<0>(qc, al, ah, sum);
      slice<1>(qc, al, ah, sum);
      slice<2>(qc, al, ah, sum);
      slice<3>(qc, al, ah, sum);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
        lo[t][k] = vpaddlq_s16(vpaddq_s16(sum[t][k][0], sum[t][k][1]));
        hi[t][k] = vpaddlq_s16(vpaddq_s16(sum[t][k][2], sum[t][k][3]));
      }
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_neon =
    rows16_dot<Rows16NeonBlocks<Rows16Q4_KNeon<WideningNibbles>, Rows16Q4_K>>;

}  // namespace hearth::quant
