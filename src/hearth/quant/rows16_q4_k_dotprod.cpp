// Q4_K rows16 kernel with ARMv8.2 SDOT (see rows16_q4_k_neon.h). Nibbles (0..15) are valid
// signed bytes, so one SDOT multiplies 4 nibbles of each row of a quad by 4 activation
// quants, taken by lane from a 16-byte load (no broadcast). Per 16 weight bytes: a mask and
// a shift, then per token two SDOTs.
#include "hearth/quant/rows16_q4_k_neon.h"

namespace hearth::quant {
namespace {

struct SdotNibbles {
  // Slice 4c + Lane: its nibbles against activation bytes 4 Lane .. 4 Lane + 3 of al / ah.
  template <int Lane, int NT, int Q>
  [[gnu::always_inline]] static void slice(const uint8_t* qp, const int8x16_t (&al)[NT],
                                           const int8x16_t (&ah)[NT], int32x4_t (&lo)[NT][Q],
                                           int32x4_t (&hi)[NT][Q]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
      const uint8x16_t w = vld1q_u8(qp + 64 * Lane + 16 * k);
      const int8x16_t wl = vreinterpretq_s8_u8(vandq_u8(w, m4));
      const int8x16_t wh = vreinterpretq_s8_u8(vshrq_n_u8(w, 4));
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        lo[t][k] = vdotq_laneq_s32(lo[t][k], wl, al[t], Lane);
        hi[t][k] = vdotq_laneq_s32(hi[t][k], wh, ah[t], Lane);
      }
    }
  }

  template <int NT, int Q>
  [[gnu::always_inline]] static void pair(const uint8_t* qp, const uint8_t* const (&aq)[NT],
                                          int32x4_t (&lo)[NT][Q], int32x4_t (&hi)[NT][Q]) {
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) lo[t][k] = hi[t][k] = vdupq_n_s32(0);
    }
    // Slices 4c .. 4c + 3 take activation bytes 16c .. 16c + 15 of each sub-block.
    for (int c = 0; c < 2; ++c) {
      int8x16_t al[NT], ah[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        al[t] = vld1q_s8(reinterpret_cast<const int8_t*>(aq[t] + 16 * c));
        ah[t] = vld1q_s8(reinterpret_cast<const int8_t*>(aq[t] + 32 + 16 * c));
      }
      const uint8_t* qc = qp + 256 * c;
      slice<0>(qc, al, ah, lo, hi);
      slice<1>(qc, al, ah, lo, hi);
      slice<2>(qc, al, ah, lo, hi);
      slice<3>(qc, al, ah, lo, hi);
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_dotprod =
    rows16_dot<Rows16NeonBlocks<Rows16Q4_KNeon<SdotNibbles>, Rows16Q4_K>>;

}  // namespace hearth::quant
