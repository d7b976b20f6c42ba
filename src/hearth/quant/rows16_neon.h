// The loop the AArch64 rows16 kernels (rows16_q4_k_neon.h, rows16_q6_k_neon.h,
// rows16_q4_0_neon.h) share, and the float steps they take per lane. The 16 rows of a group are
// four "quads": quad q holds rows 4q .. 4q + 3, 4 quant bytes of each in a 128-bit weight vector
// and one row per 32-bit lane in its sums, so every per-row scale applies lane-wise and no
// horizontal reduction runs per block. A kernel writes only `block`, one block column's products
// against NT tokens' activation blocks. Include only from the rows16 *_neon.cpp / *_dotprod.cpp
// files: everything sits in an unnamed namespace, so each file (built with its own ISA flags) gets
// its own copy.
//
// The kernels unroll every loop over tokens and quads with `#pragma GCC unroll`: their
// vectors live in small arrays indexed by those loops, and GCC at -O2 otherwise keeps such
// loops rolled and the arrays on the stack.
#pragma once

#if !defined(__aarch64__)
#error "rows16_neon.h is for the AArch64 rows16 kernel files only"
#endif

#include <arm_neon.h>

#include "hearth/quant/rows16_common.h"

namespace hearth::quant {
namespace {

// NT tokens' float sums of the 16 rows (quad q in [t][q]), carried across the whole group.
template <int NT>
using Rows16NeonAcc = float32x4_t[NT][4];

// NT tokens' prepared activation blocks for the block column at hand.
template <int NT>
using Rows16NeonActs = const uint8_t* const (&)[NT];

// How many quads a kernel works on at once for NT tokens: two for one token, so each
// activation broadcast or load serves two weight vectors and the multiply-accumulate chains
// are twice as many; one when the tokens already give that (more would spill registers).
template <int NT>
constexpr int kRows16NeonQuads = NT == 1 ? 2 : 1;

// The 4 fp16 values at p (a quad's per-row scales) as floats.
inline float32x4_t rows16_neon_f16x4(const uint8_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
}

// Per lane: fma(w * a, float(isum), acc), the scalar references' step, rounding for rounding.
inline float32x4_t rows16_neon_fma_scaled(float32x4_t acc, float32x4_t w, float a, int32x4_t isum) {
  return vfmaq_f32(acc, vmulq_n_f32(w, a), vcvtq_f32_s32(isum));
}

// x[0..1] += the 16 products of w and b, low and high halves widened to 16 bits (smlal).
[[gnu::always_inline]] inline void rows16_neon_mlal16(int16x8_t& lo, int16x8_t& hi, int8x16_t w,
                                                      int8x16_t b) {
  lo = vmlal_s8(lo, vget_low_s8(w), vget_low_s8(b));
  hi = vmlal_high_s8(hi, w, b);
}

// The 4 activation bytes of lane `Lane` of a, in every lane (what each slice multiplies).
template <int Lane>
[[gnu::always_inline]] inline int8x16_t rows16_neon_lane_bytes(int32x4_t a) {
  return vreinterpretq_s8_s32(vdupq_laneq_s32(a, Lane));
}

// One slice's products for the widening (plain NEON) Q4_0 and Q4_K kernels: for each token
// and quad k, the low-nibble vector wl[k] against bytes of lane Lane of al, into sum slots 0-1,
// and the high-nibble wh[k] against ah's, into slots kHigh and kHigh + 1 (Q4_0 adds both
// halves of its block into the same slots, Q4_K keeps its two sub-blocks apart).
template <int Lane, int kHigh, int NT, int Q, int N>
[[gnu::always_inline]] inline void rows16_neon_nibble_products(const int8x16_t (&wl)[Q],
                                                               const int8x16_t (&wh)[Q],
                                                               const int32x4_t (&al)[NT],
                                                               const int32x4_t (&ah)[NT],
                                                               int16x8_t (&sum)[NT][Q][N]) {
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    const int8x16_t bl = rows16_neon_lane_bytes<Lane>(al[t]);
    const int8x16_t bh = rows16_neon_lane_bytes<Lane>(ah[t]);
#pragma GCC unroll 4
    for (int k = 0; k < Q; ++k) {
      rows16_neon_mlal16(sum[t][k][0], sum[t][k][1], wl[k], bl);
      rows16_neon_mlal16(sum[t][k][kHigh], sum[t][k][kHigh + 1], wh[k], bh);
    }
  }
}

// The step that ends a block column of Q4_0 and Q6_K: for quads q0 .. q0 + Q - 1 and every
// token, acc = fma(d_w * d_a, float(isum), acc), d_w the quad's fp16 scales at g + 8q and d_a
// the token's float at the head of its activation block.
template <int NT, int Q>
[[gnu::always_inline]] inline void rows16_neon_scale_quads(const uint8_t* g, int q0,
                                                           const uint8_t* const (&ab)[NT],
                                                           const int32x4_t (&isum)[NT][Q],
                                                           float32x4_t (&acc)[NT][4]) {
#pragma GCC unroll 4
  for (int k = 0; k < Q; ++k) {
    const int q = q0 + k;
    const float32x4_t dw = rows16_neon_f16x4(g + 8 * q);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      acc[t][q] = rows16_neon_fma_scaled(acc[t][q], dw, rows16_load_f32(ab[t]), isum[t][k]);
    }
  }
}

// Per lane: fma(-(w * a), float(isum), acc); fmls negates the rounded product exactly.
inline float32x4_t rows16_neon_fms_scaled(float32x4_t acc, float32x4_t w, float a, int32x4_t isum) {
  return vfmsq_f32(acc, vmulq_n_f32(w, a), vcvtq_f32_s32(isum));
}

// The 4Q bytes at p (one per row of Q = 1 or 2 quads), widened to int32: quad k in out[k].
template <int Q>
inline void rows16_neon_widen_u8(const uint8_t* p, int32x4_t (&out)[Q]) {
  static_assert(Q == 1 || Q == 2);
  if constexpr (Q == 1) {
    const uint8x8_t b = vreinterpret_u8_s32(vdup_n_s32(rows16_load_i32(p)));
    out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
  } else {
    const uint16x8_t h = vmovl_u8(vld1_u8(p));
    out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
    out[1] = vreinterpretq_s32_u32(vmovl_high_u16(h));
  }
}

template <int Q>
inline void rows16_neon_widen_s8(const uint8_t* p, int32x4_t (&out)[Q]) {
  static_assert(Q == 1 || Q == 2);
  if constexpr (Q == 1) {
    const int8x8_t b = vreinterpret_s8_s32(vdup_n_s32(rows16_load_i32(p)));
    out[0] = vmovl_s16(vget_low_s16(vmovl_s8(b)));
  } else {
    const int16x8_t h = vmovl_s8(vreinterpret_s8_u8(vld1_u8(p)));
    out[0] = vmovl_s16(vget_low_s16(h));
    out[1] = vmovl_high_s16(h);
  }
}

// Rows16 kernel K of layout L: K::block<NT>(g, ab, acc) adds block column g's products
// against the tokens' activation blocks ab[0..NT) into acc. block must be always-inline, so
// the compiler sees one loop per token count, as if written out by hand. A kernel that declares
// kBlockQuads (Q4_0) takes its float steps in quads of block columns (block_steps.h): block
// then adds into the quad's sums, which start at +0 with each quad and, after its fourth block
// column or the row's last, are added into acc.
template <typename K, typename L>
struct Rows16NeonBlocks {
  static constexpr bool kQuads = requires { K::kBlockQuads; };
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    Rows16NeonAcc<NT> acc, qsum;
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[t][q] = qsum[t][q] = vdupq_n_f32(0);
    }
    const int64_t n_blocks = cols / L::kBlockCols;
    for (int64_t b = 0; b < n_blocks; ++b, g += L::kBlockBytes) {
      const uint8_t* ab[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        ab[t] =
            act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
      }
      // With 3 or 4 tokens the 4 * NT float sums would take 12-16 of the 32 vector
      // registers for the whole block, and GCC then spills the integer sums of the inner
      // loops instead. Made to live in memory between blocks, each is loaded and stored once
      // per block column, where the kernel adds to it.
      if constexpr (kQuads) {
        if constexpr (NT >= 3) asm volatile("" : "+m"(qsum), "+m"(acc));
        K::template block<NT>(g, ab, qsum);
        if (b % 4 == 3 || b + 1 == n_blocks) {
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
              acc[t][q] = vaddq_f32(acc[t][q], qsum[t][q]);
              qsum[t][q] = vdupq_n_f32(0);
            }
          }
        }
      } else {
        if constexpr (NT >= 3) asm volatile("" : "+m"(acc));
        K::template block<NT>(g, ab, acc);
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q)
        vst1q_f32(out + static_cast<size_t>(t) * out_stride + 4 * q, acc[t][q]);
    }
  }
};

}  // namespace
}  // namespace hearth::quant
