// Q6_K rows16 kernel with ARMv8.2 SDOT (see rows16_q6_k_neon.h). Quants (0..63) are valid
// signed bytes, so set k of a quad's group is one SDOT against lane k of the group's 16
// activation quants, starting from the group's -32 * sum(a) correction: 4 SDOTs per group,
// quad and token.
#include "hearth/quant/rows16_q6_k_neon.h"

namespace hearth::quant {
namespace {

struct SdotSets {
  [[gnu::always_inline]] static int32x4_t dot(int32x4_t corr, const int8x16_t (&q)[4],
                                              const uint8_t* aq) {
    const int8x16_t a = vld1q_s8(reinterpret_cast<const int8_t*>(aq));
    int32x4_t x = vdotq_laneq_s32(corr, q[0], a, 0);
    x = vdotq_laneq_s32(x, q[1], a, 1);
    x = vdotq_laneq_s32(x, q[2], a, 2);
    return vdotq_laneq_s32(x, q[3], a, 3);
  }
};

}  // namespace

Rows16DotKernel* const rows16_q6_k_dot_dotprod =
    rows16_dot<Rows16NeonBlocks<Rows16Q6_KNeon<SdotSets>, Rows16Q6_K>>;

}  // namespace hearth::quant
