// Q8_0 row-interleaved kernel for AArch64, written once over a `RowDot` policy and compiled
// by rows16_q8_0_neon.cpp (baseline Advanced SIMD) and rows16_q8_0_dotprod.cpp (SDOT), like
// neon_kernels.h. A 128-bit register holds 4 bytes of 4 rows, so a block column of 16 rows
// is 4 registers per 4-quant slice; RowDot::dot(acc, w, a) adds each row's 4 products into
// that row's int32 lane. The weights are stored as q ^ 0x80, so one xor gives q back (signed)
// and no correction is needed. Per lane the float steps are rows16_q8_0::dot_scalar's: same
// bits. Everything is in an unnamed namespace (two translation units, different flags). Loops
// unrolled as in rows16_neon.h, so that -O2 too keeps the sums in registers.
#pragma once

#include <arm_neon.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

template <typename RowDot, int NT>
void rows16_q8_0_dot_nt(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride,
                        float* out, size_t out_stride) {
  using L = Rows16Q8_0;
  const int64_t nb = cols / kQK0;
  const uint8x16_t flip = vdupq_n_u8(0x80);
  float32x4_t acc[NT][4];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[t][q] = vdupq_n_f32(0);
  }
  for (int64_t b = 0; b < nb; ++b, g += L::kBlockBytes) {
    __builtin_prefetch(g + 2048);
    float32x4_t dw[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      uint16_t h[4];
      std::memcpy(h, g + 8 * q, sizeof h);
      dw[q] = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const uint8_t* ab =
          act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
      int32x4_t isum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        int32_t a32;
        std::memcpy(&a32, ab + 8 + 4 * s, 4);
        const int8x16_t a4 = vreinterpretq_s8_s32(vdupq_n_s32(a32));
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int8x16_t w =
              vreinterpretq_s8_u8(veorq_u8(vld1q_u8(g + 32 + 64 * s + 16 * q), flip));
          isum[q] = RowDot::dot(isum[q], w, a4);
        }
      }
      float da;
      std::memcpy(&da, ab, 4);
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        acc[t][q] = vfmaq_f32(acc[t][q], vmulq_n_f32(dw[q], da), vcvtq_f32_s32(isum[q]));
      }
    }
  }
  for (int t = 0; t < NT; ++t) {
    for (int q = 0; q < 4; ++q)
      vst1q_f32(out + static_cast<size_t>(t) * out_stride + 4 * q, acc[t][q]);
  }
}

template <typename RowDot>
struct Rows16Q8_0Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    rows16_q8_0_dot_nt<RowDot, NT>(cols, g, act, act_stride, out, out_stride);
  }
};

}  // namespace
}  // namespace hearth::quant
