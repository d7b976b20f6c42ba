// GGUF-layout Q4_K and Q5_K decode (matvec) on AVX-512 VNNI, four super-blocks at a time
// against a prepared activation row (PreparedDot). Ring devices that stream their layers from
// disk read this layout, and one token's dot is compute-bound on CPUs with two 512-bit ports:
// the per-block kernel of kernels_avx512.cpp spends about as many vector instructions around
// its multiplies (scale unpacking, sums, float steps) as on them. Here the work around them is
// done once per four blocks, and the multiplies themselves take fewer instructions:
//
// - The activation is prepared once per matvec so that a 64-byte load of the weight nibbles
//   serves two sub-blocks' quants after one mask (low nibbles) and one shift and mask (high):
//   per 128 elements the prepared quants are sub-blocks [4h | 4h+2 | 4h+1 | 4h+3].
// - Each 64-byte product is one vpdpbusd from zero: a lane sums four products, at most
//   4 * 31 * 127 in magnitude, so two such vectors pack into 16-bit words without saturation
//   and one vpdpwssd applies both sub-blocks' scales (where the per-block kernel needs a
//   vpmaddubsw, a vpdpwssd and a scale permute per 64 elements).
// - The four blocks' 6-bit scales and mins are unpacked in one vector, their mins terms are
//   one vpmaddwd against sub-block sums the preparation made, and the four blocks' sums are
//   reduced together.
// - The float steps stay the scalar kernel's (block_steps.h), one block after the other: the
//   products d * da and the converted sums are formed in vectors, then walked in block order;
//   the four-row variant (PreparedDot::dot_rows4) walks four rows' steps in one vector each.
// So every row gets vec_dot's bits, as PreparedDot's contract asks. Everything here is
// AVX-512 F/BW/VL/DQ + VNNI (no VBMI: Cascade Lake has VNNI without it).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/k_groups_avx512.h"
#include "hearth/quant/l2_prefetch.h"

namespace hearth::quant {
namespace {

// The prepared bytes of a group: the 4 blocks' reordered quants, their sub-block sums, their
// scales, padded to whole cache lines.
constexpr size_t kSumsOffset = kGroupBlocks * kQKK;                  // 32 int16
constexpr size_t kScalesOffset = kSumsOffset + 64;                   // 8 floats
constexpr size_t kGroupBytes = (kScalesOffset + 32 + 63) / 64 * 64;  // 1152

// Writes the prepared row. Group layout (block b of the group, half h of a block):
//   quants  at 256 b + 128 h: activation sub-blocks 4h, 4h + 2, 4h + 1, 4h + 3 (32 bytes each)
//   sums    int16 word 8k + 2b + e = sum of sub-block 2k + e's 32 activations (k < 4, e < 2):
//           one vpmaddwd against the mins in the same order leaves 128-bit lane k holding
//           part k of each block's mins term, the order the scaled sums reduce in
//   scales  floats 2b and 2b + 1 = block b's activation scale (paired with d and dmin)
void k_prepare(int64_t n, const void* act_row, void* dst) {
  k_groups_prepare<kGroupBytes>(n, act_row, dst, [](int b, const BlockQ8_K& yb, uint8_t* p) {
    for (int h = 0; h < 2; ++h) {
      const int order[4] = {4 * h, 4 * h + 2, 4 * h + 1, 4 * h + 3};
      for (int k = 0; k < 4; ++k) {
        std::memcpy(p + kQKK * b + 128 * h + 32 * k, yb.qs + 32 * order[k], 32);
      }
    }
    for (int s = 0; s < 8; ++s) {
      const auto sum = static_cast<int16_t>(yb.bsums[2 * s] + yb.bsums[2 * s + 1]);
      std::memcpy(p + kSumsOffset + 2 * (8 * (s / 2) + 2 * b + s % 2), &sum, 2);
    }
    const float scales[2] = {yb.d, yb.d};
    std::memcpy(p + kScalesOffset + 4 * (2 * b), scales, sizeof scales);
  });
}

// Word index vectors for _mm512_permutexvar_epi16 over the scales widened to words (two
// blocks per vector, 16 words each: sc0-3, m0-3, sc4-7, m4-7).
struct ScaleIndex {
  // [2 h + part] (part 0: the low nibbles, sub-blocks 4h and 4h + 2; 1: the high ones): the
  // scale of each word of a pair of blocks' packed sums. Packed word w of 128-bit lane k
  // belongs to the pair's first block for w < 4, its second for w >= 4, and to sub-block
  // 4h + part + (k < 2 ? 0 : 2).
  __m512i scale[4];
  // The mins of the four blocks for _mm512_permutex2var_epi16 (blocks 0-1, then 2-3): word
  // 8k + 2b + e = m[2k + e] of block b, matching the prepared sums.
  __m512i mins;
  ScaleIndex() {
    alignas(64) int16_t idx[32];
    for (int h = 0; h < 2; ++h) {
      for (int part = 0; part < 2; ++part) {
        for (int k = 0; k < 4; ++k) {
          for (int w = 0; w < 8; ++w) {
            const int j = 4 * h + part + (k < 2 ? 0 : 2);  // sub-block
            idx[8 * k + w] = static_cast<int16_t>(16 * (w / 4) + (j < 4 ? j : 8 + j - 4));
          }
        }
        scale[2 * h + part] = _mm512_load_si512(idx);
      }
    }
    for (int k = 0; k < 4; ++k) {
      for (int b = 0; b < 4; ++b) {
        for (int e = 0; e < 2; ++e) {
          const int j = 2 * k + e;
          idx[8 * k + 2 * b + e] =
              static_cast<int16_t>(32 * (b / 2) + 16 * (b % 2) + (j < 4 ? 4 + j : 12 + j - 4));
        }
      }
    }
    mins = _mm512_load_si512(idx);
  }
};

// The 12-byte scale fields of the group's blocks (in 128-bit lane b of h, after d and dmin)
// unpacked: lane b bytes 0-3 sc0-3, 4-7 m0-3, 8-11 sc4-7, 12-15 m4-7 (unpack_q4k_scales).
inline __m512i unpack_scales4(__m512i h) {
  // Dwords of each lane: w0 = d|dmin, w1, w2, w3 = the 12 scale bytes.
  const __m512i w1w2w3w3 = _mm512_shuffle_epi32(h, static_cast<_MM_PERM_ENUM>(0xF9));
  const __m512i shifted =
      _mm512_srlv_epi32(w1w2w3w3, _mm512_set_epi32(4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0));
  const __m512i w1w2w1w2 = _mm512_shuffle_epi32(h, static_cast<_MM_PERM_ENUM>(0x99));
  const __m512i low_bits =
      _mm512_and_si512(shifted, _mm512_set_epi32(0x0f0f0f0f, 0x0f0f0f0f, 0x3f3f3f3f, 0x3f3f3f3f,
                                                 0x0f0f0f0f, 0x0f0f0f0f, 0x3f3f3f3f, 0x3f3f3f3f,
                                                 0x0f0f0f0f, 0x0f0f0f0f, 0x3f3f3f3f, 0x3f3f3f3f,
                                                 0x0f0f0f0f, 0x0f0f0f0f, 0x3f3f3f3f, 0x3f3f3f3f));
  // sc4-7 and m4-7 take bits 4-5 from the top two bits of w1 and w2's bytes.
  const __m512i high_bits =
      _mm512_set_epi32(0x30303030, 0x30303030, 0, 0, 0x30303030, 0x30303030, 0, 0, 0x30303030,
                       0x30303030, 0, 0, 0x30303030, 0x30303030, 0, 0);
  return _mm512_ternarylogic_epi32(low_bits, _mm512_srli_epi32(w1w2w1w2, 2), high_bits,
                                   0xF8);  // a | (b & c)
}

// The quants of a Q4_K half-block (128 elements), in the prepared order: lo = sub-blocks
// [4h | 4h + 2], hi = [4h + 1 | 4h + 3].
struct Q4KHalves {
  const BlockQ4_K& x;
  void get(int h, __m512i m4, __m512i* lo, __m512i* hi) const {
    const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
    *lo = _mm512_and_si512(v, m4);
    *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
};

// Q5_K: Q4_K's nibbles plus 16 where bit s of qh[l] is set (sub-block s, element l).
struct Q5KHalves {
  const BlockQ5_K& x;
  const __m512i qh =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh)));
  void get(int h, __m512i m4, __m512i* lo, __m512i* hi) const {
    const __m512i v = _mm512_loadu_si512(x.qs + 64 * h);
    const __m512i sixteen = _mm512_set1_epi8(16);
    // Bit selectors of the fifth bit: bytes 0-31 sub-block 4h (lo) or 4h + 1 (hi), bytes 32-63
    // sub-block 4h + 2 or 4h + 3.
    const __m512i sel_lo = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (4 * h))),
                                              _mm256_set1_epi8(static_cast<char>(4 << (4 * h))), 1);
    const __m512i sel_hi = _mm512_add_epi8(sel_lo, sel_lo);
    const __m512i l4 = _mm512_and_si512(v, m4);
    const __m512i h4 = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    *lo = _mm512_mask_add_epi8(l4, _mm512_test_epi8_mask(qh, sel_lo), l4, sixteen);
    *hi = _mm512_mask_add_epi8(h4, _mm512_test_epi8_mask(qh, sel_hi), h4, sixteen);
  }
};

template <typename Block>
struct HalvesOf;
template <>
struct HalvesOf<BlockQ4_K> {
  using type = Q4KHalves;
};
template <>
struct HalvesOf<BlockQ5_K> {
  using type = Q5KHalves;
};

// The float steps of the G (1..4) blocks at x against prepared group pa, in block order; the
// weights `ahead` bytes on are prefetched into L2 (none for 0).
template <typename Block, int G>
[[gnu::always_inline]] inline GroupSteps k_group(const Block* x, const uint8_t* pa,
                                                 const ScaleIndex& si, size_t ahead) {
  using Halves = typename HalvesOf<Block>::type;
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  // Each block's first 16 bytes (d, dmin, scales) in a lane of its own.
  const __m512i head = k_groups_lanes16<G, 0>(x);
  const __m512i scales8 = unpack_scales4(head);
  const __m512i words01 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(scales8));
  const __m512i words23 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(scales8, 1));
  // The scaled sums of blocks 2p and 2p + 1 in one vector per pair p: their vpdpbusd sums are
  // packed together, so 128-bit lane k holds two parts of the first block's sum, then two of
  // the second's.
  __m512i pair_sum[2];
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    if (2 * p >= G) {
      pair_sum[p] = _mm512_setzero_si512();
      continue;
    }
    const bool second = 2 * p + 1 < G;
    prefetch_l2_at<sizeof(Block)>(x + 2 * p, ahead);
    if (second) prefetch_l2_at<sizeof(Block)>(x + 2 * p + 1, ahead);
    const Halves first_halves{x[2 * p]};
    const Halves second_halves{x[second ? 2 * p + 1 : 2 * p]};
    const __m512i& words = p == 0 ? words01 : words23;
    const uint8_t* a0 = pa + kQKK * (2 * p);
    const uint8_t* a1 = a0 + kQKK;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i lo0, hi0, lo1 = _mm512_setzero_si512(), hi1 = _mm512_setzero_si512();
      first_halves.get(h, m4, &lo0, &hi0);
      if (second) second_halves.get(h, m4, &lo1, &hi1);
      const __m512i lo = k_groups_packed_pair(lo0, a0 + 128 * h, lo1, a1 + 128 * h);
      const __m512i hi = k_groups_packed_pair(hi0, a0 + 128 * h + 64, hi1, a1 + 128 * h + 64);
      const __m512i sc_lo = _mm512_permutexvar_epi16(si.scale[2 * h], words);
      const __m512i sc_hi = _mm512_permutexvar_epi16(si.scale[2 * h + 1], words);
      pair_sum[p] =
          h == 0 ? _mm512_madd_epi16(lo, sc_lo) : _mm512_dpwssd_epi32(pair_sum[p], lo, sc_lo);
      pair_sum[p] = _mm512_dpwssd_epi32(pair_sum[p], hi, sc_hi);
    }
  }
  // Mins: 128-bit lane k holds part k of each block's term (lane b of the 4).
  const __m512i mins = _mm512_madd_epi16(_mm512_permutex2var_epi16(words01, si.mins, words23),
                                         _mm512_loadu_si512(pa + kSumsOffset));
  // Scaled sums in the same shape (lane k: part k of blocks 0-3), then both reduced across
  // the four parts together.
  const __m512i scaled = k_groups_by_block(pair_sum[0], pair_sum[1]);
  __m512i t = _mm512_add_epi32(_mm512_shuffle_i64x2(scaled, mins, _MM_SHUFFLE(2, 0, 2, 0)),
                               _mm512_shuffle_i64x2(scaled, mins, _MM_SHUFFLE(3, 1, 3, 1)));
  t = _mm512_add_epi32(t, _mm512_shuffle_i32x4(t, t, _MM_SHUFFLE(2, 3, 0, 1)));
  // Lane 0 of t: the scaled sums of blocks 0-3, lane 2 their mins terms; interleaved as the
  // steps take them (scaled, mins of block 0, then of block 1, ...).
  const __m256 sums_f = _mm256_cvtepi32_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi32(
      _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 11, 3, 10, 2, 9, 1, 8, 0), t)));
  // d, dmin of each block times its activation scale; dmin's negated (exact), so every step is
  // one fma: fma(d * da, scaled, acc), then fma(-(dmin * da), mins, acc).
  const __m128i d_dmin = _mm512_castsi512_si128(_mm512_permutexvar_epi32(
      _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), head));
  const __m256 factors = _mm256_xor_ps(
      _mm256_mul_ps(_mm256_cvtph_ps(d_dmin),
                    _mm256_loadu_ps(reinterpret_cast<const float*>(pa + kScalesOffset))),
      _mm256_castsi256_ps(
          _mm256_set_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0)));
  return {factors, sums_f};
}

template <typename Block, size_t kL2Ahead>
void k_dot_prepared(int64_t n, const void* w, const void* prepared, float* out) {
  static const ScaleIndex si;
  *out = k_groups_row<Block, kGroupBytes, 2>(
      n, w,
      prepared, [&](auto g, const Block* x, const uint8_t* pa) __attribute__((always_inline)) {
        return k_group<Block, decltype(g)::value>(x, pa, si, kL2Ahead);
      });
}

template <typename Block>
void k_dot_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* prepared,
                          float* out) {
  static const ScaleIndex si;
  const size_t ahead = rows4_l2_ahead(w_stride);
  k_groups_rows4<Block, kGroupBytes, 2>(
      n, w, w_stride, prepared,
      [&](auto g, const Block* x, const uint8_t* pa) __attribute__((always_inline)) {
        return k_group<Block, decltype(g)::value>(x, pa, si, ahead);
      },
      out);
}

template <typename Block>
constexpr PreparedDot kPreparedDot{k_groups_bytes<kGroupBytes>,
                                   k_prepare,
                                   k_dot_prepared<Block, 0>,
                                   k_dot_prepared<Block, kLongRowL2Ahead>,
                                   nullptr,
                                   k_dot_prepared_rows4<Block>};

}  // namespace

const PreparedDot* avx512_k_prepared_dot(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ4_K:
      return &kPreparedDot<BlockQ4_K>;
    case gguf::TensorType::kQ5_K:
      return &kPreparedDot<BlockQ5_K>;
    default:
      return nullptr;
  }
}

}  // namespace hearth::quant
