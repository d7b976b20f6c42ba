// What the AVX-512 GGUF-layout K-quant decode kernels (k_quants_decode_avx512.cpp,
// q6_k_decode_avx512.cpp) share: a row goes by groups of four super-blocks against an
// activation prepared in groups of the same four, and each group ends with its blocks' float
// steps in block order.
#pragma once

#if !defined(__AVX512F__)
#error "k_groups_avx512.h is for the AVX-512 kernel files only"
#endif

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/dpbusd_from_zero.h"
#include "hearth/quant/rows4_steps_x86.h"

namespace hearth::quant {
namespace {

constexpr int kGroupBlocks = 4;  // super-blocks per group

// Bytes of a prepared activation row of n elements, GroupBytes per (possibly partial) group.
template <size_t GroupBytes>
size_t k_groups_bytes(int64_t n) {
  const int64_t nb = n / kQKK;
  return static_cast<size_t>((nb + kGroupBlocks - 1) / kGroupBlocks) * GroupBytes;
}

// Prepares a row of Q8_K blocks group by group: each group's GroupBytes start zeroed, then
// fill(b, block, group) writes block b (< 4) of it; a last group of fewer blocks keeps zeros
// in place of the missing ones.
template <size_t GroupBytes, typename Fill>
void k_groups_prepare(int64_t n, const void* act_row, void* dst, Fill fill) {
  const auto* y = static_cast<const BlockQ8_K*>(act_row);
  const int64_t nb = n / kQKK;
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t g = 0; g * kGroupBlocks < nb; ++g) {
    uint8_t* p = out + g * GroupBytes;
    std::memset(p, 0, GroupBytes);
    for (int b = 0; b < kGroupBlocks && g * kGroupBlocks + b < nb; ++b) {
      fill(b, y[g * kGroupBlocks + b], p);
    }
  }
}

// A group's float steps, in the order block_steps.h takes them: step l is
// acc = fma(factors[l], sums[l], acc) (the products d * da and the converted exact sums,
// formed in vectors beforehand).
struct GroupSteps {
  __m256 factors, sums;
};

// Calls body(std::integral_constant<int, G>{}, i) for the groups of a row of nb super-blocks:
// four blocks at a time from block i, then the one to three left.
template <typename Body>
[[gnu::always_inline]] inline void k_groups_walk(int64_t nb, Body body) {
  int64_t i = 0;
  for (; i + kGroupBlocks <= nb; i += kGroupBlocks)
    body(std::integral_constant<int, kGroupBlocks>{}, i);
  switch (nb - i) {
    case 1:
      return body(std::integral_constant<int, 1>{}, i);
    case 2:
      return body(std::integral_constant<int, 2>{}, i);
    case 3:
      return body(std::integral_constant<int, 3>{}, i);
    default:
      return;
  }
}

// acc after Steps float steps (GroupSteps). Through memory: each step takes both operands
// from loads and only its fma takes a vector slot; the asm keeps GCC from taking the lanes out
// of the registers instead, a shuffle per operand and step.
template <int Steps>
[[gnu::always_inline]] inline float fma_steps_in_order(float acc, const GroupSteps& s) {
  alignas(32) float f[8], v[8];
  _mm256_store_ps(f, s.factors);
  _mm256_store_ps(v, s.sums);
  asm("" : "+m"(f), "+m"(v));
#pragma GCC unroll 8
  for (int l = 0; l < Steps; ++l) acc = std::fma(f[l], v[l], acc);
  return acc;
}

// The dot of a row of n elements: group(std::integral_constant<int, G>, blocks, prepared
// group) returns the GroupSteps of the G (1..4) blocks, StepsPerBlock steps each, four at a
// time, then the one to three left. Give group the always_inline attribute: GCC otherwise
// calls a body this large.
template <typename Block, size_t GroupBytes, int StepsPerBlock, typename Group>
[[gnu::always_inline]] inline float k_groups_row(int64_t n, const void* w, const void* prepared,
                                                 Group group) {
  const auto* x = static_cast<const Block*>(w);
  const auto* pa = static_cast<const uint8_t*>(prepared);
  float acc = 0.0f;
  k_groups_walk(
      n / kQKK, [&](auto g, int64_t i) __attribute__((always_inline)) {
        constexpr int G = decltype(g)::value;
        const uint8_t* pg = pa + static_cast<size_t>(i / kGroupBlocks) * GroupBytes;
        acc = fma_steps_in_order<StepsPerBlock * G>(acc, group(g, x + i, pg));
      });
  return acc;
}

// k_groups_row for four rows at once (w_stride bytes apart): out[r] is row r's dot, with
// k_groups_row's bits.
template <typename Block, size_t GroupBytes, int StepsPerBlock, typename Group>
[[gnu::always_inline]] inline void k_groups_rows4(int64_t n, const void* w, size_t w_stride,
                                                  const void* prepared, Group group, float* out) {
  const auto* rows = static_cast<const uint8_t*>(w);
  const auto* pa = static_cast<const uint8_t*>(prepared);
  __m128 acc = _mm_setzero_ps();
  k_groups_walk(
      n / kQKK, [&](auto g, int64_t i) __attribute__((always_inline)) {
        constexpr int G = decltype(g)::value;
        const uint8_t* pg = pa + static_cast<size_t>(i / kGroupBlocks) * GroupBytes;
        __m256 factors[4], sums[4];
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const GroupSteps s =
              group(g, reinterpret_cast<const Block*>(rows + r * w_stride) + i, pg);
          factors[r] = s.factors;
          sums[r] = s.sums;
        }
        acc = fma_steps_rows4<StepsPerBlock * G>(acc, factors, sums);
      });
  _mm_storeu_ps(out, acc);
}

// The 16 bytes at byte offset Offset of each of the G (1..4) blocks at x, block b in 128-bit
// lane b (the lanes past G zero).
template <int G, size_t Offset, typename Block>
[[gnu::always_inline]] inline __m512i k_groups_lanes16(const Block* x) {
  const auto at = [&](int b) {
    return _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint8_t*>(x + b) + Offset));
  };
  __m512i v = _mm512_zextsi128_si512(at(0));
  if constexpr (G > 1) v = _mm512_inserti32x4(v, at(1), 1);
  if constexpr (G > 2) v = _mm512_inserti32x4(v, at(2), 2);
  if constexpr (G > 3) v = _mm512_inserti32x4(v, at(3), 3);
  return v;
}

// The vpdpbusd sums of the same 64 quant positions of two blocks (q0 against activation a0,
// q1 against a1), packed into 16-bit words: 128-bit lane k holds lane k's four 32-bit sums of
// the first block, then of the second. A sum of four products of a quant below 64 and an
// activation of magnitude at most 128 stays below 2^15, so nothing saturates.
[[gnu::always_inline]] inline __m512i k_groups_packed_pair(__m512i q0, const uint8_t* a0,
                                                           __m512i q1, const uint8_t* a1) {
  return _mm512_packs_epi32(dpbusd_from_zero(q0, _mm512_loadu_si512(a0)),
                            dpbusd_from_zero(q1, _mm512_loadu_si512(a1)));
}

// The 32-bit sums of two pairs of blocks (p01: 128-bit lane k holds two parts of block 0, then
// two of block 1; p23 the same for blocks 2 and 3) as lane k = part k of blocks 0, 1, 2, 3.
[[gnu::always_inline]] inline __m512i k_groups_by_block(__m512i p01, __m512i p23) {
  const __m512 a = _mm512_castsi512_ps(p01), b = _mm512_castsi512_ps(p23);
  return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                          _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
}

}  // namespace
}  // namespace hearth::quant
