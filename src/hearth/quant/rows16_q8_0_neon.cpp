// Q8_0 rows16 kernel, baseline Advanced SIMD (see rows16_q8_0_neon.h): widening multiplies,
// then pairwise adds into each row's lane (products are at most 128 * 127, pairs of them fit
// in int16).
#include "hearth/quant/rows16_q8_0_neon.h"

namespace hearth::quant {
namespace {

struct WideningRowDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a) {
    const int16x8_t lo = vmull_s8(vget_low_s8(w), vget_low_s8(a));
    const int16x8_t hi = vmull_high_s8(w, a);
    return vpadalq_s16(acc, vpaddq_s16(lo, hi));
  }
};

}  // namespace

Rows16DotKernel* const rows16_q8_0_dot_neon = rows16_dot<Rows16Q8_0Kernel<WideningRowDot>>;

}  // namespace hearth::quant
