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

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <utility>

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
inline int32x4_t dot32x4(const int8_t* a, int8x16_t q0, int8x16_t q1) {
  return Dot::dot(Dot::dot(vdupq_n_s32(0), q0, vld1q_s8(a)), q1, vld1q_s8(a + 16));
}

template <typename Dot>
inline int32_t dot32(const int8_t* a, int8x16_t q0, int8x16_t q1) {
  return vaddvq_s32(dot32x4<Dot>(a, q0, q1));
}

// Lane r: the sum of the four lanes of v[r], exact (four rows' block sums side by side).
inline int32x4_t sum_rows4(const int32x4_t (&v)[4]) {
  return vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
}

// Four rows' fp16 fields at p + r * stride, widened to floats (lane r: row r's).
inline float32x4_t f16_rows4(const uint8_t* p, size_t stride) {
  uint16x4_t h = vdup_n_u16(0);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(p), h, 0);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(p + stride), h, 1);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(p + 2 * stride), h, 2);
  h = vld1_lane_u16(reinterpret_cast<const uint16_t*>(p + 3 * stride), h, 3);
  return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

// Calls f.template operator()<I>() for I = 0 .. N - 1, in order: lane indices of NEON's
// by-element instructions must be constants. Mark f always_inline: GCC 12 otherwise kept
// Q6_K's halves as calls, with the block's sum stored and loaded around every product.
template <typename F, int... I>
[[gnu::always_inline]] inline void unrolled_in(F& f, std::integer_sequence<int, I...> /*order*/) {
  (f.template operator()<I>(), ...);
}
template <int N, typename F>
[[gnu::always_inline]] inline void unrolled(F&& f) {
  unrolled_in(f, std::make_integer_sequence<int, N>{});
}

// The exact integer sums of one K-quant super-block against its activation block, each in
// four int32 lanes whose sum is the value: `scaled` = sum_j scale[j] * (quants_j . act_j),
// `mins` = sum_j min[j] * (activation sum of sub-block j). Sub-block sums are scaled in the
// vectors (one multiply-add by a lane of the scales) and never reduced across lanes here, so
// a one-row kernel reduces once per block and the four-row one four rows together.
struct KBlockSums {
  int32x4_t scaled, mins;
};

// The 8 scales and 8 mins of a Q4_K / Q5_K block (unpack_q4k_scales), in vectors: scales as
// two int32x4 (sub-blocks 0-3, 4-7), mins as one int16x8. packed: the 12 scale bytes, with 4
// more bytes of the block readable after them.
struct KScales {
  int32x4_t sc[2];
  int16x8_t m;
};
inline KScales unpack_k_scales(const uint8_t* packed) {
  // Words w0, w1, w2 of the 12 bytes, each mask repeated in every byte:
  //   sc0-3 = w0 & 0x3f, m0-3 = w1 & 0x3f,
  //   sc4-7 = (w2 & 0x0f) | ((w0 >> 2) & 0x30), m4-7 = ((w2 >> 4) & 0x0f) | ((w1 >> 2) & 0x30).
  const uint32x4_t w = vreinterpretq_u32_u8(vld1q_u8(packed));
  const int32_t shifts[4] = {0, 0, 0, -4};
  const uint32_t low_masks[4] = {0x3f3f3f3fu, 0x3f3f3f3fu, 0x0f0f0f0fu, 0x0f0f0f0fu};
  const uint32_t high_masks[4] = {0, 0, 0x30303030u, 0x30303030u};
  const uint32x4_t w0122 = vcopyq_laneq_u32(w, 3, w, 2);
  const uint32x4_t low = vandq_u32(vshlq_u32(w0122, vld1q_s32(shifts)), vld1q_u32(low_masks));
  const uint32x4_t w0101 = vcombine_u32(vget_low_u32(w), vget_low_u32(w));
  const uint32x4_t high = vandq_u32(vshrq_n_u32(w0101, 2), vld1q_u32(high_masks));
  const uint32x4_t b = vorrq_u32(low, high);  // bytes: sc0-3, m0-3, sc4-7, m4-7
  const uint16x8_t sc = vmovl_u8(vget_low_u8(vreinterpretq_u8_u32(vuzp1q_u32(b, b))));
  const uint16x8_t m = vmovl_u8(vget_low_u8(vreinterpretq_u8_u32(vuzp2q_u32(b, b))));
  return {{vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc))),
           vreinterpretq_s32_u32(vmovl_high_u16(sc))},
          vreinterpretq_s16_u16(m)};
}

// The activation block's 8 sub-block sums (pairs of its 16-element group sums).
inline int16x8_t q8_k_sub_block_sums(const BlockQ8_K& y) {
  return vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
}

// Q4_K / Q5_K x Q8_K: quants.get<C>(q) sets q[0], q[1] to the 32 signed quants of sub-block
// 2C and q[2], q[3] to those of sub-block 2C + 1. bs: q8_k_sub_block_sums(y).
template <typename Dot, typename Block, typename Quants>
[[gnu::always_inline]] inline KBlockSums k_nibbles_block_sums(const Block& x, const BlockQ8_K& y,
                                                              int16x8_t bs, Quants quants) {
  const KScales s = unpack_k_scales(x.scales);
  KBlockSums out;
  out.mins = vmlal_high_s16(vmull_s16(vget_low_s16(s.m), vget_low_s16(bs)), s.m, bs);
  out.scaled = vdupq_n_s32(0);
  unrolled<4>([&]<int C>() __attribute__((always_inline)) {
    int8x16_t q[4];
    quants.template get<C>(q);
    const int8_t* ay = y.qs + 64 * C;
    out.scaled =
        vmlaq_laneq_s32(out.scaled, dot32x4<Dot>(ay, q[0], q[1]), s.sc[C / 2], (2 * C) % 4);
    out.scaled = vmlaq_laneq_s32(out.scaled, dot32x4<Dot>(ay + 32, q[2], q[3]), s.sc[C / 2],
                                 (2 * C + 1) % 4);
  });
  return out;
}

// The nibble decoders of Q4_K and Q5_K for k_nibbles_block_sums.
struct Q4KQuants {
  const BlockQ4_K& x;
  template <int C>
  [[gnu::always_inline]] void get(int8x16_t (&q)[4]) const {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const uint8x16_t q0 = vld1q_u8(x.qs + 32 * C);
    const uint8x16_t q1 = vld1q_u8(x.qs + 32 * C + 16);
    q[0] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
    q[1] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
    q[2] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
    q[3] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
  }
};
struct Q5KQuants {
  const BlockQ5_K& x;
  uint8x16_t qh0, qh1;
  // A constructor, not default member initializers: clang's vld1q_u8 is a statement
  // expression, which it refuses there.
  explicit Q5KQuants(const BlockQ5_K& block)
      : x(block), qh0(vld1q_u8(block.qh)), qh1(vld1q_u8(block.qh + 16)) {}
  // Bit b of every byte of qh, at bit 0.
  template <int B>
  [[gnu::always_inline]] static uint8x16_t bit(uint8x16_t qh) {
    const uint8x16_t one = vdupq_n_u8(1);
    if constexpr (B == 0)
      return vandq_u8(qh, one);
    else
      return vandq_u8(vshrq_n_u8(qh, B), one);
  }
  // Low nibbles take bit 2C of qh as their fifth bit, high nibbles bit 2C + 1; vsli keeps the
  // destination's low four bits and inserts the bit above them, so the low nibbles need no mask.
  template <int C>
  [[gnu::always_inline]] void get(int8x16_t (&q)[4]) const {
    const uint8x16_t q0 = vld1q_u8(x.qs + 32 * C);
    const uint8x16_t q1 = vld1q_u8(x.qs + 32 * C + 16);
    q[0] = vreinterpretq_s8_u8(vsliq_n_u8(q0, bit<2 * C>(qh0), 4));
    q[1] = vreinterpretq_s8_u8(vsliq_n_u8(q1, bit<2 * C>(qh1), 4));
    q[2] = vreinterpretq_s8_u8(vsliq_n_u8(vshrq_n_u8(q0, 4), bit<2 * C + 1>(qh0), 4));
    q[3] = vreinterpretq_s8_u8(vsliq_n_u8(vshrq_n_u8(q1, 4), bit<2 * C + 1>(qh1), 4));
  }
};
template <typename Block>
using KQuants = std::conditional_t<std::is_same_v<Block, BlockQ4_K>, Q4KQuants, Q5KQuants>;

template <typename Dot, typename Block>
void neon_dot_k_nibbles(int64_t n, const void* w, const void* a, float* out) {
  ref::dot_blocks_chained<Block, BlockQ8_K>(
      n, w, a, out, [&](float acc, const Block& x, const BlockQ8_K& y) {
        const KBlockSums s =
            k_nibbles_block_sums<Dot>(x, y, q8_k_sub_block_sums(y), KQuants<Block>{x});
        return k_block_step(acc, fp16_to_f32(x.d), fp16_to_f32(x.dmin), y.d, vaddvq_s32(s.scaled),
                            vaddvq_s32(s.mins));
      });
}

// Four rows w_stride bytes apart (TypeTraits::vec_dot_rows4): each row's sums as the one-row
// kernel forms them, reduced together (sum_rows4), and the four rows' float steps in the
// lanes of one vector (lane r: row r's fma, the one-row kernel's single rounding).
template <typename Dot, typename Block>
void neon_dot_k_nibbles_rows4(int64_t n, const void* w, size_t w_stride, const void* a,
                              float* out) {
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  float32x4_t acc = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const int16x8_t bs = q8_k_sub_block_sums(y[i]);
    const uint8_t* b0 = pw + i * sizeof(Block);
    int32x4_t scaled[4], mins[4];
    for (int r = 0; r < 4; ++r) {
      const Block& x = *reinterpret_cast<const Block*>(b0 + r * w_stride);
      const KBlockSums s = k_nibbles_block_sums<Dot>(x, y[i], bs, KQuants<Block>{x});
      scaled[r] = s.scaled;
      mins[r] = s.mins;
    }
    // k_block_step_f: fma(d * da, scaled, acc), then fma(-(dmin * da), mins, acc).
    const float32x4_t fd = vmulq_n_f32(f16_rows4(b0 + offsetof(Block, d), w_stride), y[i].d);
    const float32x4_t fm =
        vnegq_f32(vmulq_n_f32(f16_rows4(b0 + offsetof(Block, dmin), w_stride), y[i].d));
    acc = vfmaq_f32(acc, fd, vcvtq_f32_s32(sum_rows4(scaled)));
    acc = vfmaq_f32(acc, fm, vcvtq_f32_s32(sum_rows4(mins)));
  }
  vst1q_f32(out, acc);
}

// Q6_K x Q8_K: the quants as unsigned 0..63 (signed bytes for Dot), the -32 offset as
// 32 * sum_g scale[g] * bsums[g] per block. Lane sum: the block's exact integer sum.
template <typename Dot>
[[gnu::always_inline]] inline int32x4_t q6_k_block_sums(const BlockQ6_K& x, const BlockQ8_K& y) {
  const uint8x16_t m3 = vdupq_n_u8(0x03);
  const uint8x16_t m30 = vdupq_n_u8(0x30);
  const int8x16_t sc8 = vld1q_s8(x.scales);
  const int16x8_t sc16[2] = {vmovl_s8(vget_low_s8(sc8)), vmovl_high_s8(sc8)};
  const int32x4_t sc[4] = {vmovl_s16(vget_low_s16(sc16[0])), vmovl_high_s16(sc16[0]),
                           vmovl_s16(vget_low_s16(sc16[1])), vmovl_high_s16(sc16[1])};
  const int16x8_t bs[2] = {vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8)};
  int32x4_t offset = vmull_s16(vget_low_s16(sc16[0]), vget_low_s16(bs[0]));
  offset = vmlal_high_s16(offset, sc16[0], bs[0]);
  offset = vmlal_s16(offset, vget_low_s16(sc16[1]), vget_low_s16(bs[1]));
  offset = vmlal_high_s16(offset, sc16[1], bs[1]);
  int32x4_t sum = vnegq_s32(vshlq_n_s32(offset, 5));
  unrolled<2>([&]<int H>() __attribute__((always_inline)) {
    const uint8_t* ql = x.ql + 64 * H;
    const uint8_t* qh = x.qh + 32 * H;
    const int8_t* ay = y.qs + 128 * H;
    // Lanes l = 16J .. 16J + 15 of each quarter.
    unrolled<2>([&]<int J>() __attribute__((always_inline)) {
      const uint8x16_t la = vld1q_u8(ql + 16 * J);
      const uint8x16_t lb = vld1q_u8(ql + 32 + 16 * J);
      const uint8x16_t hb = vld1q_u8(qh + 16 * J);
      // Low nibbles: vsli keeps la's low four bits and puts the two high bits above them;
      // high nibbles: vsri keeps the two high bits (placed at bits 4-5, the rest clear) and
      // puts la's high nibble below them. Each quant is 0..63.
      const uint8x16_t q[4] = {
          vsliq_n_u8(la, vandq_u8(hb, m3), 4),
          vsliq_n_u8(lb, vandq_u8(vshrq_n_u8(hb, 2), m3), 4),
          vsriq_n_u8(vandq_u8(hb, m30), la, 4),
          vsriq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m30), lb, 4),
      };
      unrolled<4>([&]<int K>() __attribute__((always_inline)) {
        constexpr int g = 8 * H + 2 * K + J;  // the group of 16 quants (scale index)
        const int32x4_t p =
            Dot::dot(vdupq_n_s32(0), vreinterpretq_s8_u8(q[K]), vld1q_s8(ay + 32 * K + 16 * J));
        sum = vmlaq_laneq_s32(sum, p, sc[g / 4], g % 4);
      });
    });
  });
  return sum;
}

template <typename Dot>
void neon_dot_q6_k(int64_t n, const void* w, const void* a, float* out) {
  ref::dot_blocks_chained<BlockQ6_K, BlockQ8_K>(
      n, w, a, out, [&](float acc, const BlockQ6_K& x, const BlockQ8_K& y) {
        return q6_k_block_step(acc, fp16_to_f32(x.d), y.d, vaddvq_s32(q6_k_block_sums<Dot>(x, y)));
      });
}

template <typename Dot>
void neon_dot_q6_k_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  float32x4_t acc = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const uint8_t* b0 = pw + i * sizeof(BlockQ6_K);
    int32x4_t sums[4];
    for (int r = 0; r < 4; ++r) {
      sums[r] = q6_k_block_sums<Dot>(*reinterpret_cast<const BlockQ6_K*>(b0 + r * w_stride), y[i]);
    }
    // q6_k_block_step_f: fma(d * da, sum, acc).
    const float32x4_t fd = vmulq_n_f32(f16_rows4(b0 + offsetof(BlockQ6_K, d), w_stride), y[i].d);
    acc = vfmaq_f32(acc, fd, vcvtq_f32_s32(sum_rows4(sums)));
  }
  vst1q_f32(out, acc);
}

template <typename Dot>
void neon_dot_q8_0(int64_t n, const void* w, const void* a, float* out) {
  ref::dot_blocks_chained<BlockQ8_0, BlockQ8_0>(
      n, w, a, out, [](float acc, const BlockQ8_0& x, const BlockQ8_0& y) {
        const int32_t isum = dot32<Dot>(y.qs, vld1q_s8(x.qs), vld1q_s8(x.qs + 16));
        return q8_0_block_step(acc, fp16_to_f32(x.d), fp16_to_f32(y.d), isum);
      });
}

// One block of four rows (the first at b0, w_stride bytes apart) against activation block y:
// lane r holds row r's block scale d_r * da and its exact integer sum, converted.
// quants(x, lo, hi) gives block x's 32 quants as signed bytes.
struct Rows4Block {
  float32x4_t scale, sum;
};
template <typename Dot, typename Block, typename Quants>
[[gnu::always_inline]] inline Rows4Block rows4_block(const uint8_t* b0, size_t w_stride,
                                                     const BlockQ8_0& y, Quants quants) {
  int32x4_t v[4];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    int8x16_t lo, hi;
    quants(*reinterpret_cast<const Block*>(b0 + r * w_stride), lo, hi);
    v[r] = dot32x4<Dot>(y.qs, lo, hi);
  }
  return {vmulq_n_f32(f16_rows4(b0 + offsetof(Block, d), w_stride), fp16_to_f32(y.d)),
          vcvtq_f32_s32(sum_rows4(v))};
}

inline void q8_0_quants(const BlockQ8_0& x, int8x16_t& lo, int8x16_t& hi) {
  lo = vld1q_s8(x.qs);
  hi = vld1q_s8(x.qs + 16);
}

template <typename Dot>
void neon_dot_q8_0_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  float32x4_t acc = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const Rows4Block b =
        rows4_block<Dot, BlockQ8_0>(pw + i * sizeof(BlockQ8_0), w_stride, y[i], q8_0_quants);
    acc = vfmaq_f32(acc, b.scale, b.sum);  // q8_0_block_step_f
  }
  vst1q_f32(out, acc);
}

// Q4_0's 32 quants of one block as signed bytes (nibbles - 8): lo, hi.
inline void q4_0_quants(const BlockQ4_0& x, int8x16_t& lo, int8x16_t& hi) {
  const uint8x16_t q = vld1q_u8(x.qs);
  const int8x16_t eight = vdupq_n_s8(8);
  lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), eight);
  hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
}

template <typename Dot>
void neon_dot_q4_0(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  *out = q4_0_row_steps(
      n / kQK0, [&](int64_t i) { return fp16_to_f32(x[i].d) * fp16_to_f32(y[i].d); },
      [&](int64_t i) {
        int8x16_t lo, hi;
        q4_0_quants(x[i], lo, hi);
        return static_cast<float>(dot32<Dot>(y[i].qs, lo, hi));
      });
}

// Four rows, each lane taking its row's quad steps (q4_0_steps) in the one-row kernel's order.
template <typename Dot>
void neon_dot_q4_0_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  const auto block = [&](int64_t i) {
    return rows4_block<Dot, BlockQ4_0>(pw + i * sizeof(BlockQ4_0), w_stride, y[i], q4_0_quants);
  };
  const int64_t nb = n / kQK0;
  float32x4_t acc = vdupq_n_f32(0);
  for (int64_t i = 0; i < nb; i += 4) {
    Rows4Block b = block(i);
    float32x4_t q = vfmaq_f32(vdupq_n_f32(0), b.scale, b.sum);  // q4_0_quad_first
    for (int64_t k = i + 1; k < i + 4 && k < nb; ++k) {
      b = block(k);
      q = vfmaq_f32(q, b.scale, b.sum);  // q4_0_quad_next
    }
    acc = vaddq_f32(acc, q);  // q4_0_quad_end
  }
  vst1q_f32(out, acc);
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
  constexpr VecDots kDots{neon_dot_k_nibbles<Dot, BlockQ4_K>,
                          neon_dot_k_nibbles<Dot, BlockQ5_K>,
                          neon_dot_q6_k<Dot>,
                          neon_dot_q8_0<Dot>,
                          neon_dot_q4_0<Dot>,
                          neon_dot_f32,
                          neon_dot_f16,
                          neon_dot_bf16};
  return kDots.find(type);
}

// Dot::kFourRowKQuants: whether the K-quants take four-row kernels with this policy (with the
// widening multiplies they executed more instructions per row and block than the one-row
// kernels: docs/kernels.md, "Four rows a call"); without it they are not even instantiated.
template <typename Dot>
VecDotRows4Fn neon_rows4_table(gguf::TensorType type) {
  if constexpr (Dot::kFourRowKQuants) {
    switch (type) {
      case gguf::TensorType::kQ4_K:
        return neon_dot_k_nibbles_rows4<Dot, BlockQ4_K>;
      case gguf::TensorType::kQ5_K:
        return neon_dot_k_nibbles_rows4<Dot, BlockQ5_K>;
      case gguf::TensorType::kQ6_K:
        return neon_dot_q6_k_rows4<Dot>;
      default:
        break;
    }
  }
  switch (type) {
    case gguf::TensorType::kQ8_0:
      return neon_dot_q8_0_rows4<Dot>;
    case gguf::TensorType::kQ4_0:
      return neon_dot_q4_0_rows4<Dot>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace hearth::quant
