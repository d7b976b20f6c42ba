// Q4_0 rows16 kernel with ARMv8.2 SDOT (see rows16_q4_0_neon.h). Nibbles (0..15) are valid
// signed bytes, so one SDOT multiplies 4 nibbles of each row of a quad by 4 activation
// quants, taken by lane from a 16-byte load (no broadcast). Per 16 weight bytes: a mask and a
// shift, then per token two SDOTs into the row sums.
#include "hearth/quant/rows16_q4_0_neon.h"

namespace hearth::quant {
namespace {

struct SdotNibbles {
  // Slice Lane: its nibbles against activation bytes 4 Lane .. 4 Lane + 3 of al (elements
  // 0..15) and ah (elements 16..31).
  template <int Lane, int NT, int Q>
  [[gnu::always_inline]] static void slice(const uint8_t* qv, const int8x16_t (&al)[NT],
                                           const int8x16_t (&ah)[NT], int32x4_t (&isum)[NT][Q]) {
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
      int8x16_t wl, wh;
      rows16_q4_0_nibbles(qv + 64 * Lane + 16 * k, wl, wh);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        isum[t][k] = vdotq_laneq_s32(isum[t][k], wl, al[t], Lane);
        isum[t][k] = vdotq_laneq_s32(isum[t][k], wh, ah[t], Lane);
      }
    }
  }

  template <int NT, int Q>
  [[gnu::always_inline]] static void sums(const uint8_t* qv, const uint8_t* const (&aq)[NT],
                                          int32x4_t (&isum)[NT][Q]) {
    int8x16_t al[NT], ah[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      al[t] = vld1q_s8(reinterpret_cast<const int8_t*>(aq[t]));
      ah[t] = vld1q_s8(reinterpret_cast<const int8_t*>(aq[t] + 16));
    }
    slice<0>(qv, al, ah, isum);
    slice<1>(qv, al, ah, isum);
    slice<2>(qv, al, ah, isum);
    slice<3>(qv, al, ah, isum);
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_0_dot_dotprod = rows16_dot<Rows16Q4_0NeonBlocks<SdotNibbles>>;

}  // namespace hearth::quant
