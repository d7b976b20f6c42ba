// Pieces shared by the x86 dot kernel files (kernels_avx2.cpp, kernels_avx512.cpp). Include
// only from those: the float vector follows the including file's ISA flags (__AVX512F__ -> 16
// lanes, else 8), and everything sits in an unnamed namespace so each file gets its own copy
// (an inline function with external linkage could let the linker keep the AVX-512 build for
// the AVX2 callers).
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "x86_dot_common.h is for kernels_avx2.cpp / kernels_avx512.cpp only"
#endif

#include <immintrin.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/l2_prefetch.h"

namespace hearth::quant {
namespace {

inline float h2f(uint16_t h) {
  return _cvtsh_ss(h);
}

inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The NT activation rows of a multi-token kernel, a_stride bytes apart.
template <int NT>
inline void q8_k_rows(const void* a, size_t a_stride, const BlockQ8_K* ys[NT]) {
  for (int t = 0; t < NT; ++t) {
    ys[t] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + t * a_stride);
  }
}

// The super-blocks i < nb of a GGUF-layout K-quant row in pairs, so that a kernel reduces two
// blocks' integer lanes together: block(i, v) writes block i's sums for each of the NT tokens
// into v, then pair(i, a, b, both) takes blocks i and i + 1 (both false: i is the last block
// and b is zero) and runs their float steps in order.
template <int NT, typename V, typename Block, typename Pair>
[[gnu::always_inline]] inline void for_block_pairs(int64_t nb, V zero, Block block, Pair pair) {
  for (int64_t i = 0; i < nb; i += 2) {
    V a[NT], b[NT];
    block(i, a);
    const bool both = i + 1 < nb;
    if (both) {
      block(i + 1, b);
    } else {
      for (int t = 0; t < NT; ++t) b[t] = zero;
    }
    pair(i, a, b, both);
  }
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

#if defined(__AVX512F__)
// The widest f32 vector of the file's ISA.
struct FloatVec {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V load_bf16(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
  static float sum(V v) { return _mm512_reduce_add_ps(v); }
};
#else
struct FloatVec {
  using V = __m256;
  static constexpr int kLanes = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V load_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
  }
  static float sum(V v) { return hsum256(v); }
};
#endif

// ---- K-quants ------------------------------------------------------------------------
// The Q4_K / Q5_K super-block scales against one Q8_K block: the 8 sub-block scales (bytes of
// the result), d = d_x * d_y, and the mins' part dmin * sum_j m[j] * (bsums[2j] + bsums[2j+1])
// accumulated into acc_min in 8 lanes.
template <typename Block>
inline uint64_t k_scales_mins(const Block& x, const BlockQ8_K& y, float* d, __m256* acc_min) {
  uint64_t sc8, m8;
  unpack_q4k_scales_u64(x.scales, &sc8, &m8);
  const float dy = y.d;
  *d = h2f(x.d) * dy;
  const float dmin = h2f(x.dmin) * dy;
  const __m128i m_pairs = _mm_unpacklo_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m8)),
                                            _mm_cvtsi64_si128(static_cast<int64_t>(m8)));
  const __m256i prod_min = _mm256_madd_epi16(
      _mm256_cvtepu8_epi16(m_pairs), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)));
  *acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod_min), *acc_min);
  return sc8;
}

// ---- Q8_0 / Q4_0 x Q8_0 -----------------------------------------------------------------
// Eight fp16 scales at stride `stride` bytes -> (8) f32. Composed in general registers so
// the vector shuffle port (busy with the kernels' own shuffles) is not used per block.
inline __m256 load_scales8(const uint8_t* p, size_t stride) {
  uint64_t lo = 0, hi = 0;
  for (int k = 0; k < 4; ++k) {
    uint16_t a, b;
    std::memcpy(&a, p + stride * k, 2);
    std::memcpy(&b, p + stride * (k + 4), 2);
    lo |= static_cast<uint64_t>(a) << (16 * k);
    hi |= static_cast<uint64_t>(b) << (16 * k);
  }
  return _mm256_cvtph_ps(_mm_set_epi64x(static_cast<int64_t>(hi), static_cast<int64_t>(lo)));
}

// acc after the Q8_0 steps (q8_0_block_step_f) of four blocks in order, whose scales
// and sums are lanes 0..3 of s and f. The SIMD kernels form a group's scales and exact sums in
// vectors, then step through them in block order as the reference does.
inline float q8_0_steps4(float acc, __m128 s, __m128 f) {
  acc = q8_0_block_step_f(acc, _mm_cvtss_f32(s), _mm_cvtss_f32(f));
  acc =
      q8_0_block_step_f(acc, _mm_cvtss_f32(_mm_movehdup_ps(s)), _mm_cvtss_f32(_mm_movehdup_ps(f)));
  acc = q8_0_block_step_f(acc, _mm_cvtss_f32(_mm_movehl_ps(s, s)),
                          _mm_cvtss_f32(_mm_movehl_ps(f, f)));
  return q8_0_block_step_f(acc, _mm_cvtss_f32(_mm_shuffle_ps(s, s, 3)),
                           _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3)));
}

// acc after the steps of Q8_0 blocks [i, nb): the tail after the last whole group.
inline float q8_tail(float acc, const BlockQ8_0* x, const BlockQ8_0* y, int64_t i, int64_t nb) {
  for (; i < nb; ++i) {
    int32_t isum = 0;
    for (int e = 0; e < kQK0; ++e) isum += x[i].qs[e] * y[i].qs[e];
    acc = q8_0_block_step(acc, h2f(x[i].d), h2f(y[i].d), isum);
  }
  return acc;
}

// acc after Q4_0's quad steps (q4_0_steps) over blocks [0, nb): the tail after the last whole
// group, which starts a quad.
inline float q4_tail(float acc, const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  return q4_0_steps(
      acc, nb, [&](int64_t i) { return h2f(x[i].d) * h2f(y[i].d); },
      [&](int64_t i) {
        int32_t isum = 0;
        for (int j = 0; j < kQK0 / 2; ++j) {
          isum +=
              ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        return static_cast<float>(isum);
      });
}

// The tails of Q8Packed::dot_rows4 for Q8_0 and Q4_0 weight rows: acc after the n blocks at
// w (as stored) against the activation blocks at a.
inline float q8_rows4_tail(float acc, const uint8_t* w, const uint8_t* a, int64_t n) {
  return q8_tail(acc, reinterpret_cast<const BlockQ8_0*>(w), reinterpret_cast<const BlockQ8_0*>(a),
                 0, n);
}
inline float q4_rows4_tail(float acc, const uint8_t* w, const uint8_t* a, int64_t n) {
  return q4_tail(acc, reinterpret_cast<const BlockQ4_0*>(w), reinterpret_cast<const BlockQ8_0*>(a),
                 n);
}

// Q8_0 rows packed for the prefill kernels: each whole group of `Group` blocks takes
// WGroupBytes in a weight row and AGroupBytes in an activation row; the blocks after the last
// whole group follow unchanged. Rows as stored are the case of groups kept as their blocks
// (group bytes Group * sizeof(BlockQ8_0)).
template <int Group, size_t WGroupBytes, size_t AGroupBytes>
struct Q8Packed {
  static size_t bytes(int64_t n, size_t group_bytes) {
    const int64_t nb = n / kQK0;
    return static_cast<size_t>(nb / Group) * group_bytes +
           static_cast<size_t>(nb % Group) * sizeof(BlockQ8_0);
  }
  static size_t w_bytes(int64_t n) { return bytes(n, WGroupBytes); }
  static size_t a_bytes(int64_t n) { return bytes(n, AGroupBytes); }

  // Packs each whole group of a row with pack_group(blocks, out), group_bytes apart, then
  // copies the blocks after it.
  template <typename PackGroup>
  static void pack(int64_t n, const void* row, void* dst, size_t group_bytes,
                   PackGroup pack_group) {
    const auto* x = static_cast<const BlockQ8_0*>(row);
    auto* out = static_cast<uint8_t*>(dst);
    const int64_t nb = n / kQK0, ng = nb / Group;
    for (int64_t g = 0; g < ng; ++g, out += group_bytes) pack_group(x + g * Group, out);
    std::memcpy(out, x + ng * Group, static_cast<size_t>(nb - ng * Group) * sizeof(BlockQ8_0));
  }

  // out[t] = acc[t] after the steps of the blocks after the whole groups of the weight row pw
  // and activation row t (pa + t * a_stride).
  template <int NT>
  static void finish(int64_t n, const uint8_t* pw, const uint8_t* pa, size_t a_stride,
                     const float* acc, float* out) {
    const int64_t nb = n / kQK0, ng = nb / Group;
    const auto* xt = reinterpret_cast<const BlockQ8_0*>(pw + static_cast<size_t>(ng) * WGroupBytes);
    for (int t = 0; t < NT; ++t) {
      const auto* yt = reinterpret_cast<const BlockQ8_0*>(pa + t * a_stride +
                                                          static_cast<size_t>(ng) * AGroupBytes);
      out[t] = q8_tail(acc[t], xt, yt, 0, nb - ng * Group);
    }
  }

  // A four-row kernel (PreparedDot::dot_rows4) over the weight rows w + r * w_stride against
  // activation row a: per whole group, step(acc, wg, ag, ahead) takes acc (lane r: row r)
  // through the four rows' group, wg(r) being row r's group, ag the activation's and ahead
  // the weights' prefetch distance (rows4_l2_ahead); then out[r] = tail(lane r, row r's blocks
  // after the whole groups, the activation's, their count).
  template <typename Step, typename Tail>
  [[gnu::always_inline]] static void dot_rows4(int64_t n, const void* w, size_t w_stride,
                                               const void* a, float* out, Step step, Tail tail) {
    const auto* pw = static_cast<const uint8_t*>(w);
    const auto* pa = static_cast<const uint8_t*>(a);
    const int64_t nb = n / kQK0, ng = nb / Group;
    const size_t ahead = rows4_l2_ahead(w_stride);
    __m128 acc = _mm_setzero_ps();
    for (int64_t g = 0; g < ng; ++g) {
      const uint8_t* wg0 = pw + static_cast<size_t>(g) * WGroupBytes;
      acc = step(
          acc, [&](int r) { return wg0 + r * w_stride; }, pa + static_cast<size_t>(g) * AGroupBytes,
          ahead);
    }
    alignas(16) float lanes[4];
    _mm_store_ps(lanes, acc);
    for (int r = 0; r < 4; ++r) {
      out[r] = tail(lanes[r], pw + r * w_stride + static_cast<size_t>(ng) * WGroupBytes,
                    pa + static_cast<size_t>(ng) * AGroupBytes, nb - ng * Group);
    }
  }

  // An NT-row kernel over weight row w and activation rows a + t * a_stride: per whole group,
  // group_dot(wg, ag, acc) takes row t's acc[t] through the group's block steps in order (wg:
  // the group in w, ag: in activation row 0), then finish. This and group_dot are always inlined,
  // so the compiler weighs the kernel's loops as one function: inlined late, group_dot's inner
  // loops can look no hotter than the group loop to the register allocator.
  template <int NT, typename GroupDot>
  [[gnu::always_inline]] static void dot(int64_t n, const void* w, const void* a, size_t a_stride,
                                         float* out, GroupDot group_dot) {
    const auto* pw = static_cast<const uint8_t*>(w);
    const auto* pa = static_cast<const uint8_t*>(a);
    const int64_t nb = n / kQK0, ng = nb / Group;
    float acc[NT] = {};
    for (int64_t g = 0; g < ng; ++g) {
      group_dot(pw + static_cast<size_t>(g) * WGroupBytes,
                pa + static_cast<size_t>(g) * AGroupBytes, acc);
    }
    finish<NT>(n, pw, pa, a_stride, acc, out);
  }
};

// ---- Float weights x f32 activations ---------------------------------------------------
// load(p) widens FloatVec::kLanes weights at p to f32; load1(p) one weight (for the tail).
template <typename Elem, typename Load, typename Load1>
inline float dot_float_row(int64_t n, const Elem* x, const float* y, Load load, Load1 load1) {
  using F = FloatVec;
  constexpr int L = F::kLanes;
  F::V acc0 = F::zero(), acc1 = F::zero();
  F::V acc2 = F::zero(), acc3 = F::zero();
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    acc0 = F::fmadd(load(x + i), F::load(y + i), acc0);
    acc1 = F::fmadd(load(x + i + L), F::load(y + i + L), acc1);
    acc2 = F::fmadd(load(x + i + 2 * L), F::load(y + i + 2 * L), acc2);
    acc3 = F::fmadd(load(x + i + 3 * L), F::load(y + i + 3 * L), acc3);
  }
  for (; i + L <= n; i += L) acc0 = F::fmadd(load(x + i), F::load(y + i), acc0);
  float tail = 0;
  for (; i < n; ++i) tail += load1(x + i) * y[i];
  return F::sum(F::add(F::add(acc0, acc1), F::add(acc2, acc3))) + tail;
}

void dot_f32(int64_t n, const void* w, const void* a, float* out) {
  *out = dot_float_row(
      n, static_cast<const float*>(w), static_cast<const float*>(a),
      [](const float* p) { return FloatVec::load(p); }, [](const float* p) { return *p; });
}

void dot_f16(int64_t n, const void* w, const void* a, float* out) {
  *out = dot_float_row(
      n, static_cast<const uint16_t*>(w), static_cast<const float*>(a),
      [](const uint16_t* p) { return FloatVec::load_f16(p); },
      [](const uint16_t* p) { return h2f(*p); });
}

void dot_bf16(int64_t n, const void* w, const void* a, float* out) {
  *out = dot_float_row(
      n, static_cast<const uint16_t*>(w), static_cast<const float*>(a),
      [](const uint16_t* p) { return FloatVec::load_bf16(p); },
      [](const uint16_t* p) { return bf16_to_f32(*p); });
}

}  // namespace
}  // namespace hearth::quant
