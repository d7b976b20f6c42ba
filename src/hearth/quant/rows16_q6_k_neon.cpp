// Q6_K rows16 kernel, baseline Advanced SIMD (see rows16_q6_k_neon.h). Quants (0..63) times
// broadcast activation bytes through widening multiply-adds: each int16 lane sums one
// product per set, at most 4 * 63 * 127 = 32004, then widens to int32 before any pairwise
// add, so nothing wraps. Per quad and group (48 weight bytes): 6 ops rebuild the quants,
// then per token 4 lane broadcasts, 8 widening multiply-adds and 5 ops that widen, add the
// correction and apply the scale.
#include "hearth/quant/rows16_q6_k_neon.h"

namespace hearth::quant {
namespace {

struct WideningSets {
  // Set K's products: its 4 quants of each row against activation bytes 4K .. 4K + 3.
  template <int K>
  [[gnu::always_inline]] static void set(int16x8_t& lo, int16x8_t& hi, int8x16_t q, int32x4_t a) {
    rows16_neon_mlal16(lo, hi, q, rows16_neon_lane_bytes<K>(a));
  }

  [[gnu::always_inline]] static int32x4_t dot(int32x4_t corr, const int8x16_t (&q)[4],
                                              const uint8_t* aq) {
    const int32x4_t a = vreinterpretq_s32_u8(vld1q_u8(aq));
    int16x8_t lo = vdupq_n_s16(0), hi = vdupq_n_s16(0);  // rows 0-1, rows 2-3 of the quad
    set<0>(lo, hi, q[0], a);
    set<1>(lo, hi, q[1], a);
    set<2>(lo, hi, q[2], a);
    set<3>(lo, hi, q[3], a);
    return vaddq_s32(corr, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
  }
};

}  // namespace

Rows16DotKernel* const rows16_q6_k_dot_neon =
    rows16_dot<Rows16NeonBlocks<Rows16Q6_KNeon<WideningSets>, Rows16Q6_K>>;

}  // namespace hearth::quant
