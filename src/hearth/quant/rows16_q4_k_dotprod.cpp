// Q4_K and Q5_K rows16 kernels with ARMv8.2 SDOT (see rows16_q4_k_neon.h). The quants (0..15,
// or 0..31 with Q5_K's fifth bit) are valid signed bytes, so one SDOT multiplies 4 quants of
// each row of a quad by 4 activation quants, taken by lane from a 16-byte load (no
// broadcast). Per 16 weight bytes: a mask and a shift (Q5_K: and a load, two compares and two
// bit selects for the fifth bits), then per token two SDOTs.
#include "hearth/quant/rows16_q4_k_neon.h"

namespace hearth::quant {
namespace {

struct SdotPairs {
  // Slice 4c + Lane: its quants against activation bytes 4 Lane .. 4 Lane + 3 of al / ah.
  template <int Lane, int NT, int Q, typename Slices>
  [[gnu::always_inline]] static void slice(const Slices& w, int c, const int8x16_t (&al)[NT],
                                           const int8x16_t (&ah)[NT], int32x4_t (&lo)[NT][Q],
                                           int32x4_t (&hi)[NT][Q]) {
    int8x16_t wl[Q], wh[Q];
    w.get(4 * c + Lane, wl, wh);
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        lo[t][k] = vdotq_laneq_s32(lo[t][k], wl[k], al[t], Lane);
        hi[t][k] = vdotq_laneq_s32(hi[t][k], wh[k], ah[t], Lane);
      }
    }
  }

  template <int NT, int Q, typename Slices>
  [[gnu::always_inline]] static void pair(const Slices& w, const uint8_t* const (&aq)[NT],
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
      slice<0>(w, c, al, ah, lo, hi);
      slice<1>(w, c, al, ah, lo, hi);
      slice<2>(w, c, al, ah, lo, hi);
      slice<3>(w, c, al, ah, lo, hi);
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_dotprod = rows16_dot<Rows16Q4_KNeonBlocks<SdotPairs>>;
Rows16DotKernel* const rows16_q5_k_dot_dotprod = rows16_dot<Rows16Q5_KNeonBlocks<SdotPairs>>;

}  // namespace hearth::quant
