// NEON dot kernels, written once over a `Dot` policy and compiled twice: by
// kernels_neon.cpp (baseline Advanced SIMD: widening multiplies + pairwise adds) and by
// kernels_dotprod.cpp (ARMv8.2 SDOT). Everything is in an unnamed namespace so the two
// translation units, built with different flags, never share a symbol.
//
// Dot::dot(acc, a, b) adds the 16 products a[i]*b[i] of two int8x16 vectors into the four
// int32 lanes of acc (which lane gets which product differs by policy; callers only use
// the sum of all lanes). Quants enter as signed bytes: 4-, 5- and 6-bit quants fit in int8
// and Q8_0 weights may be -128; products are at most 128 * 127, exact in int16.
#pragma once

#include <arm_neon.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/ref_blocks.h"

namespace hearth::quant {
namespace {

inline float fp16_to_f32(uint16_t h) {
  __fp16 v;
  std::memcpy(&v, &h, sizeof v);
  return static_cast<float>(v);
}

template <typename Dot>
inline int32_t dot32(const int8_t* a, int8x16_t q0, int8x16_t q1) {
  int32x4_t acc = Dot::dot(vdupq_n_s32(0), q0, vld1q_s8(a));
  acc = Dot::dot(acc, q1, vld1q_s8(a + 16));
  return vaddvq_s32(acc);
}

// Q4_K / Q5_K x Q8_K: quants(c, q) sets q[0], q[1] to the 32 signed quants of sub-block 2c
// and q[2], q[3] to those of sub-block 2c + 1.
template <typename Dot, typename Block, typename Quants>
inline float k_nibbles_block_dot(float acc, const Block& x, const BlockQ8_K& y, Quants quants) {
  uint8_t sc[8], m[8];
  unpack_q4k_scales(x.scales, sc, m);
  int32_t imin = 0;
  for (int s = 0; s < 8; ++s) imin += m[s] * (y.bsums[2 * s] + y.bsums[2 * s + 1]);
  int32_t isum = 0;
  for (int c = 0; c < 4; ++c) {
    int8x16_t q[4];
    quants(c, q);
    const int8_t* ay = y.qs + 64 * c;
    const int32_t lo = dot32<Dot>(ay, q[0], q[1]);
    const int32_t hi = dot32<Dot>(ay + 32, q[2], q[3]);
    isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
  }
  return k_block_step(acc, fp16_to_f32(x.d), fp16_to_f32(x.dmin), y.d, isum, imin);
}

template <typename Dot>
void neon_dot_q4_k(int64_t n, const void* w, const void* a, float* out) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  ref::dot_blocks_chained<BlockQ4_K, BlockQ8_K>(
      n, w, a, out, [&](float acc, const BlockQ4_K& x, const BlockQ8_K& y) {
        return k_nibbles_block_dot<Dot>(acc, x, y, [&](int c, int8x16_t q[4]) {
          const uint8x16_t q0 = vld1q_u8(x.qs + 32 * c);
          const uint8x16_t q1 = vld1q_u8(x.qs + 32 * c + 16);
          q[0] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
          q[1] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
          q[2] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
          q[3] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
        });
      });
}

template <typename Dot>
void neon_dot_q5_k(int64_t n, const void* w, const void* a, float* out) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  const uint8x16_t one = vdupq_n_u8(1);
  ref::dot_blocks_chained<BlockQ5_K, BlockQ8_K>(
      n, w, a, out, [&](float acc, const BlockQ5_K& x, const BlockQ8_K& y) {
        const uint8x16_t qh0 = vld1q_u8(x.qh);
        const uint8x16_t qh1 = vld1q_u8(x.qh + 16);
        return k_nibbles_block_dot<Dot>(acc, x, y, [&](int c, int8x16_t q[4]) {
          // Bit 2c (low nibbles) and 2c+1 (high nibbles) of qh, moved to bit 4.
          const int8x16_t sh_lo = vdupq_n_s8(static_cast<int8_t>(-2 * c));
          const int8x16_t sh_hi = vdupq_n_s8(static_cast<int8_t>(-2 * c - 1));
          const uint8x16_t h0lo = vshlq_n_u8(vandq_u8(vshlq_u8(qh0, sh_lo), one), 4);
          const uint8x16_t h1lo = vshlq_n_u8(vandq_u8(vshlq_u8(qh1, sh_lo), one), 4);
          const uint8x16_t h0hi = vshlq_n_u8(vandq_u8(vshlq_u8(qh0, sh_hi), one), 4);
          const uint8x16_t h1hi = vshlq_n_u8(vandq_u8(vshlq_u8(qh1, sh_hi), one), 4);
          const uint8x16_t q0 = vld1q_u8(x.qs + 32 * c);
          const uint8x16_t q1 = vld1q_u8(x.qs + 32 * c + 16);
          q[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m4), h0lo));
          q[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m4), h1lo));
          q[2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q0, 4), h0hi));
          q[3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q1, 4), h1hi));
        });
      });
}

template <typename Dot>
inline int32_t dot16(const int8_t* a, int8x16_t q) {
  return vaddvq_s32(Dot::dot(vdupq_n_s32(0), q, vld1q_s8(a)));
}

template <typename Dot>
void neon_dot_q6_k(int64_t n, const void* w, const void* a, float* out) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  const uint8x16_t m3 = vdupq_n_u8(0x03);
  const int8x16_t off = vdupq_n_s8(32);
  ref::dot_blocks_chained<BlockQ6_K, BlockQ8_K>(
      n, w, a, out, [&](float acc, const BlockQ6_K& x, const BlockQ8_K& y) {
        int32_t isum = 0;
        for (int h = 0; h < 2; ++h) {
          const uint8_t* ql = x.ql + 64 * h;
          const uint8_t* qh = x.qh + 32 * h;
          const int8_t* sc = x.scales + 8 * h;
          const int8_t* ay = y.qs + 128 * h;
          for (int j = 0; j < 2; ++j) {  // lanes l = 16j .. 16j + 15 of each quarter
            const uint8x16_t la = vld1q_u8(ql + 16 * j);
            const uint8x16_t lb = vld1q_u8(ql + 32 + 16 * j);
            const uint8x16_t hb = vld1q_u8(qh + 16 * j);
            const uint8x16_t q[4] = {
                vorrq_u8(vandq_u8(la, m4), vshlq_n_u8(vandq_u8(hb, m3), 4)),
                vorrq_u8(vandq_u8(lb, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4)),
                vorrq_u8(vshrq_n_u8(la, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4)),
                vorrq_u8(vshrq_n_u8(lb, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
            };
            for (int k = 0; k < 4; ++k) {
              const int8x16_t qs = vsubq_s8(vreinterpretq_s8_u8(q[k]), off);
              isum += sc[2 * k + j] * dot16<Dot>(ay + 32 * k + 16 * j, qs);
            }
          }
        }
        return q6_k_block_step(acc, fp16_to_f32(x.d), y.d, isum);
      });
}

template <typename Dot>
void neon_dot_q8_0(int64_t n, const void* w, const void* a, float* out) {
  ref::dot_blocks_chained<BlockQ8_0, BlockQ8_0>(
      n, w, a, out, [](float acc, const BlockQ8_0& x, const BlockQ8_0& y) {
        const int32_t isum = dot32<Dot>(y.qs, vld1q_s8(x.qs), vld1q_s8(x.qs + 16));
        return q8_0_block_step(acc, fp16_to_f32(x.d), fp16_to_f32(y.d), isum);
      });
}

template <typename Dot>
void neon_dot_q4_0(int64_t n, const void* w, const void* a, float* out) {
  const uint8x16_t m4 = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  *out = q4_0_row_steps(
      n / kQK0, [&](int64_t i) { return fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d); },
      [&](int64_t i) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
        return static_cast<float>(dot32<Dot>(y[i].qs, lo, hi));
      });
}

// Float rows: load4(p) widens four weights to f32.
template <typename Elem, typename Load4>
inline float neon_dot_float(int64_t n, const Elem* x, const float* y, Load4 load4,
                            float (*load1)(const Elem*)) {
  float32x4_t acc0 = vdupq_n_f32(0), acc1 = vdupq_n_f32(0);
  float32x4_t acc2 = vdupq_n_f32(0), acc3 = vdupq_n_f32(0);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = vfmaq_f32(acc0, load4(x + i), vld1q_f32(y + i));
    acc1 = vfmaq_f32(acc1, load4(x + i + 4), vld1q_f32(y + i + 4));
    acc2 = vfmaq_f32(acc2, load4(x + i + 8), vld1q_f32(y + i + 8));
    acc3 = vfmaq_f32(acc3, load4(x + i + 12), vld1q_f32(y + i + 12));
  }
  for (; i + 4 <= n; i += 4) acc0 = vfmaq_f32(acc0, load4(x + i), vld1q_f32(y + i));
  float tail = 0;
  for (; i < n; ++i) tail += load1(x + i) * y[i];
  return vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3))) + tail;
}

inline float load1_f32(const float* p) {
  return *p;
}
inline float load1_f16(const uint16_t* p) {
  return fp16_to_f32(*p);
}
inline float load1_bf16(const uint16_t* p) {
  const uint32_t bits = static_cast<uint32_t>(*p) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline void neon_dot_f32(int64_t n, const void* w, const void* a, float* out) {
  *out = neon_dot_float(
      n, static_cast<const float*>(w), static_cast<const float*>(a),
      [](const float* p) { return vld1q_f32(p); }, load1_f32);
}

inline void neon_dot_f16(int64_t n, const void* w, const void* a, float* out) {
  *out = neon_dot_float(
      n, static_cast<const uint16_t*>(w), static_cast<const float*>(a),
      [](const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }, load1_f16);
}

inline void neon_dot_bf16(int64_t n, const void* w, const void* a, float* out) {
  *out = neon_dot_float(
      n, static_cast<const uint16_t*>(w), static_cast<const float*>(a),
      [](const uint16_t* p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); },
      load1_bf16);
}

template <typename Dot>
VecDotFn neon_table(gguf::TensorType type) {
  constexpr VecDots kDots{neon_dot_q4_k<Dot>, neon_dot_q5_k<Dot>, neon_dot_q6_k<Dot>,
                          neon_dot_q8_0<Dot>, neon_dot_q4_0<Dot>, neon_dot_f32,
                          neon_dot_f16,       neon_dot_bf16};
  return kDots.find(type);
}

}  // namespace
}  // namespace hearth::quant
