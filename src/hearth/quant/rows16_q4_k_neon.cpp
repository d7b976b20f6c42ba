// Q4_K and Q5_K rows16 kernels, baseline Advanced SIMD (see rows16_q4_k_neon.h). Quants times
// activation bytes (4 at a time, broadcast from a lane of a 16-byte load) through widening
// multiply-adds: each int16 lane takes one product per slice, at most 8 * 15 * 127 = 15240
// over a sub-block's 8 slices for Q4_K and 8 * 31 * 127 = 31496 for Q5_K, so a sub-block
// fits in 16 bits either way. Q4_K adds pairs of lanes once before widening (at most 30480);
// Q5_K widens first (its pairs could reach 62992). So nothing wraps. Per 16 weight bytes: a
// mask and a shift (Q5_K: and a load, two compares and two bit selects for the fifth bits),
// then per token two lane broadcasts (for one token, shared by two quads) and four widening
// multiply-adds.
#include "hearth/quant/rows16_q4_k_neon.h"

namespace hearth::quant {
namespace {

struct WideningPairs {
  // Per token and quad: the int16 sums of the sub-block 2p products of the quad's rows 0-1
  // and 2-3 (4 lanes per row, one per byte position), then those of sub-block 2p + 1.
  template <int NT, int Q>
  using Sums = int16x8_t[NT][Q][4];

  // Slice 4c + Lane: its quants against activation bytes 4 Lane .. 4 Lane + 3 of al / ah,
  // broadcast from the lane.
  template <int Lane, int NT, int Q, typename Slices>
  [[gnu::always_inline]] static void slice(const Slices& w, int c, const int32x4_t (&al)[NT],
                                           const int32x4_t (&ah)[NT], Sums<NT, Q>& sum) {
    int8x16_t wl[Q], wh[Q];
    w.get(4 * c + Lane, wl, wh);
    rows16_neon_nibble_products<Lane, 2>(wl, wh, al, ah, sum);
  }

  // Each row's int32 sum from its 4 int16 lanes in rows01 (rows 0-1) and rows23 (rows 2-3).
  template <bool kFive>
  [[gnu::always_inline]] static int32x4_t rows(int16x8_t rows01, int16x8_t rows23) {
    if constexpr (kFive) return vpaddq_s32(vpaddlq_s16(rows01), vpaddlq_s16(rows23));
    return vpaddlq_s16(vpaddq_s16(rows01, rows23));
  }

  template <int NT, int Q, typename Slices>
  [[gnu::always_inline]] static void pair(const Slices& w, const uint8_t* const (&aq)[NT],
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
      slice<0>(w, c, al, ah, sum);
      slice<1>(w, c, al, ah, sum);
      slice<2>(w, c, al, ah, sum);
      slice<3>(w, c, al, ah, sum);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int k = 0; k < Q; ++k) {
        lo[t][k] = rows<Slices::kFive>(sum[t][k][0], sum[t][k][1]);
        hi[t][k] = rows<Slices::kFive>(sum[t][k][2], sum[t][k][3]);
      }
    }
  }
};

}  // namespace

Rows16DotKernel* const rows16_q4_k_dot_neon = rows16_dot<Rows16Q4_KNeonBlocks<WideningPairs>>;
Rows16DotKernel* const rows16_q5_k_dot_neon = rows16_dot<Rows16Q5_KNeonBlocks<WideningPairs>>;

}  // namespace hearth::quant
