// Q8_0 rows16 kernel with ARMv8.2 SDOT (see rows16_q8_0_neon.h): one instruction per 4 rows x
// 4 quants.
#include "hearth/quant/rows16_q8_0_neon.h"

namespace hearth::quant {
namespace {

struct SdotRowDot {
  static int32x4_t dot(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_s32(acc, w, a); }
};

}  // namespace

Rows16DotKernel* const rows16_q8_0_dot_dotprod = rows16_dot<Rows16Q8_0Kernel<SdotRowDot>>;

}  // namespace hearth::quant
