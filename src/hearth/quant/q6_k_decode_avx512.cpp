// GGUF-layout Q6_K decode (matvec) on AVX-512 VNNI, four super-blocks at a time against a
// prepared activation row (PreparedDot); the Q6_K counterpart of k_quants_decode_avx512.cpp,
// with the same reasons and the same devices:
//
// - A 64-byte vpdpbusd lane sums four products of a quant (0..63) and an activation
//   (|a| <= 128), at most 32256 in magnitude, so the sums of two blocks pack into 16-bit words
//   and one vpdpwssd applies their group scales (signed bytes widened to words) for both.
// - The -32 offset of the quants is -32 * sum_g scale[g] * (group g's activation sum): one
//   vpdpwssd per pair of blocks, of the scales times 32 against the group sums, which the
//   preparation negated and laid out as the packed sums are.
// - The four blocks' scales and d come in together, their sums are reduced together, and the
//   float steps stay the scalar kernel's (q6_k_block_step_f), one block after the other.
// So every row gets vec_dot's bits. AVX-512 F/BW/VL/DQ + VNNI only.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/k_groups_avx512.h"
#include "hearth/quant/l2_prefetch.h"

namespace hearth::quant {
namespace {

constexpr size_t kSumsOffset = kGroupBlocks * kQKK;                  // 64 int16
constexpr size_t kScalesOffset = kSumsOffset + 128;                  // 4 floats
constexpr size_t kGroupBytes = (kScalesOffset + 16 + 63) / 64 * 64;  // 1216

// Group layout: the 4 blocks' activation quants as they are (256 bytes each); then for each
// pair p of blocks (2p, 2p + 1) 32 int16 words, word 8k + w = minus the activation sum of
// group 4k + w % 4 of the pair's first block (w < 4) or second block (w >= 4); then the 4
// activation scales.
void q6_k_prepare(int64_t n, const void* act_row, void* dst) {
  k_groups_prepare<kGroupBytes>(n, act_row, dst, [](int b, const BlockQ8_K& yb, uint8_t* p) {
    std::memcpy(p + kQKK * b, yb.qs, kQKK);
    for (int k = 0; k < 4; ++k) {
      for (int w = 0; w < 4; ++w) {
        const auto sum = static_cast<int16_t>(-yb.bsums[4 * k + w]);
        std::memcpy(p + kSumsOffset + 2 * (32 * (b / 2) + 8 * k + 4 * (b % 2) + w), &sum, 2);
      }
    }
    std::memcpy(p + kScalesOffset + 4 * b, &yb.d, sizeof yb.d);
  });
}

// Word index vectors for _mm512_permutexvar_epi16 over a pair of blocks' 16 group scales
// widened to words (the first block's in words 0-15, the second's in 16-31).
struct Q6KScaleIndex {
  // [2 h + part] (part 0: elements 0-63 of half h, groups 8h + k; 1: elements 64-127, groups
  // 8h + 4 + k, for 128-bit lane k): word w of lane k of the pair's packed sums belongs to the
  // first block for w < 4, the second for w >= 4.
  __m512i scale[4];
  // For the offset: word 8k + w is group 4k + w % 4 of the first (w < 4) or second block.
  __m512i offset;
  Q6KScaleIndex() {
    alignas(64) int16_t idx[32];
    for (int h = 0; h < 2; ++h) {
      for (int part = 0; part < 2; ++part) {
        for (int k = 0; k < 4; ++k) {
          for (int w = 0; w < 8; ++w) {
            idx[8 * k + w] = static_cast<int16_t>(16 * (w / 4) + 8 * h + 4 * part + k);
          }
        }
        scale[2 * h + part] = _mm512_load_si512(idx);
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int w = 0; w < 8; ++w)
        idx[8 * k + w] = static_cast<int16_t>(16 * (w / 4) + 4 * k + w % 4);
    }
    offset = _mm512_load_si512(idx);
  }
};

// The 128 quants (0..63) of half h of block x: elements 0-63 in lo, 64-127 in hi, in order.
inline void q6_k_half(const BlockQ6_K& x, int h, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i ql = _mm512_loadu_si512(x.ql + 64 * h);
  // qh bits 0-1 (elements 0-31), 2-3 (32-63), 4-5 (64-95), 6-7 (96-127): shifted right by 2
  // in the upper 256 bits, bits 4-5 of each byte are the high bits of hi, and bits 0-1 those
  // of lo.
  const __m512i qh = _mm512_srlv_epi64(
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * h))),
      _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0));
  *lo = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_slli_epi64(qh, 4), m30,
                                  0xF8);  // a | (b & c)
  *hi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), qh, m30, 0xF8);
}

// The float steps of the G (1..4) blocks at x against prepared group pa, in block order; the
// weights `ahead` bytes on are prefetched into L2 (none for 0).
template <int G>
[[gnu::always_inline]] inline GroupSteps q6_k_group(const BlockQ6_K* x, const uint8_t* pa,
                                                    const Q6KScaleIndex& si, size_t ahead) {
  // The 16 group scales of each block in a 128-bit lane of its own, widened to words.
  const __m512i sc8 = k_groups_lanes16<G, offsetof(BlockQ6_K, scales)>(x);
  const __m512i words[2] = {_mm512_cvtepi8_epi16(_mm512_castsi512_si256(sc8)),
                            _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(sc8, 1))};
  // The scaled sums of blocks 2p and 2p + 1 in one vector per pair p: 128-bit lane k holds two
  // parts of the first block's sum, then two of the second's.
  __m512i pair_sum[2];
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    if (2 * p >= G) {
      pair_sum[p] = _mm512_setzero_si512();
      continue;
    }
    const bool second = 2 * p + 1 < G;
    const BlockQ6_K& x0 = x[2 * p];
    const BlockQ6_K& x1 = x[second ? 2 * p + 1 : 2 * p];
    prefetch_l2_at<sizeof(BlockQ6_K)>(&x0, ahead);
    if (second) prefetch_l2_at<sizeof(BlockQ6_K)>(&x1, ahead);
    const uint8_t* a0 = pa + kQKK * (2 * p);
    const uint8_t* a1 = a0 + kQKK;
    // The offset first: 32 * scale against the negated group sums.
    pair_sum[p] =
        _mm512_madd_epi16(_mm512_slli_epi16(_mm512_permutexvar_epi16(si.offset, words[p]), 5),
                          _mm512_loadu_si512(pa + kSumsOffset + 64 * p));
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i lo0, hi0, lo1 = _mm512_setzero_si512(), hi1 = _mm512_setzero_si512();
      q6_k_half(x0, h, &lo0, &hi0);
      if (second) q6_k_half(x1, h, &lo1, &hi1);
      const __m512i lo = k_groups_packed_pair(lo0, a0 + 128 * h, lo1, a1 + 128 * h);
      const __m512i hi = k_groups_packed_pair(hi0, a0 + 128 * h + 64, hi1, a1 + 128 * h + 64);
      pair_sum[p] =
          _mm512_dpwssd_epi32(pair_sum[p], lo, _mm512_permutexvar_epi16(si.scale[2 * h], words[p]));
      pair_sum[p] = _mm512_dpwssd_epi32(pair_sum[p], hi,
                                        _mm512_permutexvar_epi16(si.scale[2 * h + 1], words[p]));
    }
  }
  // Lane k: part k of blocks 0-3; then summed across the lanes into lane 0.
  __m512i t = k_groups_by_block(pair_sum[0], pair_sum[1]);
  t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
  t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m128 sums_f = _mm_cvtepi32_ps(_mm512_castsi512_si128(t));
  // d of each block (composed in general registers) times its activation scale.
  uint64_t d4 = 0;
  for (int b = 0; b < G; ++b) d4 |= static_cast<uint64_t>(x[b].d) << (16 * b);
  const __m128 factors =
      _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(d4))),
                 _mm_loadu_ps(reinterpret_cast<const float*>(pa + kScalesOffset)));
  // q6_k_block_step_f; lanes 4-7 unused.
  return {_mm256_castps128_ps256(factors), _mm256_castps128_ps256(sums_f)};
}

template <size_t kL2Ahead>
void q6_k_dot_prepared(int64_t n, const void* w, const void* prepared, float* out) {
  static const Q6KScaleIndex si;
  *out = k_groups_row<BlockQ6_K, kGroupBytes, 1>(
      n, w,
      prepared, [&](auto g, const BlockQ6_K* x, const uint8_t* pa) __attribute__((always_inline)) {
        return q6_k_group<decltype(g)::value>(x, pa, si, kL2Ahead);
      });
}

void q6_k_dot_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* prepared,
                             float* out) {
  static const Q6KScaleIndex si;
  const size_t ahead = rows4_l2_ahead(w_stride);
  k_groups_rows4<BlockQ6_K, kGroupBytes, 1>(
      n, w, w_stride, prepared,
      [&](auto g, const BlockQ6_K* x, const uint8_t* pa) __attribute__((always_inline)) {
        return q6_k_group<decltype(g)::value>(x, pa, si, ahead);
      },
      out);
}

constexpr PreparedDot kQ6KPreparedDot{
    k_groups_bytes<kGroupBytes>,        q6_k_prepare, q6_k_dot_prepared<0>,
    q6_k_dot_prepared<kLongRowL2Ahead>, nullptr,      q6_k_dot_prepared_rows4};

}  // namespace

const PreparedDot* avx512_q6_k_prepared_dot() {
  return &kQ6KPreparedDot;
}

}  // namespace hearth::quant
