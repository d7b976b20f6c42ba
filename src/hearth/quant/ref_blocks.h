// The row loops the scalar reference formats share (internal): a row is n / QK blocks, and
// each format says only what it does with one block. Included by baseline-compiled files only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rounding.h"

namespace hearth::quant::ref {

// Elements per block: the "_0" formats hold 32, the K formats 256.
template <class Block>
inline constexpr int kBlockElems = kQKK;
template <>
inline constexpr int kBlockElems<BlockQ8_0> = kQK0;
template <>
inline constexpr int kBlockElems<BlockQ4_0> = kQK0;

// to_float(block, y) writes the block's QK values to y.
template <class Block, class ToFloat>
inline void dequantize_blocks(const void* src, float* dst, int64_t n, ToFloat to_float) {
  constexpr int qk = kBlockElems<Block>;
  const auto* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / qk; ++i) to_float(b[i], dst + i * qk);
}

// quantize(x, block) fills the block from its QK values x.
template <class Block, class Quantize>
inline void quantize_blocks(const float* src, void* dst, int64_t n, Quantize quantize) {
  constexpr int qk = kBlockElems<Block>;
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / qk; ++i) quantize(src + i * qk, b[i]);
}

// *out = acc after acc = block_step(acc, weight block, activation block) over the blocks in
// order from 0: the kernels whose float steps are block_steps.h's (the reference and NEON).
// Always inlined, so GCC weighs a SIMD kernel's loops as one function (as when each kernel
// wrote its own block loop): inlined late, the block body's inner loops can look no hotter
// than the block loop to the register allocator.
template <class W, class A, class BlockStep>
[[gnu::always_inline]] inline void dot_blocks_chained(int64_t n, const void* w, const void* a,
                                                      float* out, BlockStep block_step) {
  constexpr int qk = kBlockElems<W>;
  const auto* x = static_cast<const W*>(w);
  const auto* y = static_cast<const A*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / qk; ++i) acc = block_step(acc, x[i], y[i]);
  *out = acc;
}

// Largest |x[j]| for j < N (a multiple of 8). Eight partial maxima let the baseline compiler
// vectorize it; the activation quantizers run it on the decode path.
template <int N>
inline float abs_max(const float* x) {
  float part[8] = {};
  for (int j = 0; j < N; j += 8) {
    for (int k = 0; k < 8; ++k) part[k] = std::max(part[k], std::fabs(x[j + k]));
  }
  float amax = 0;
  for (float p : part) amax = std::max(amax, p);
  return amax;
}

// The x[j] of largest magnitude for j < n (the first of equal ones): the formats with a
// lone negative level map it there.
inline float largest_magnitude(const float* x, int n) {
  float vmax = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > std::fabs(vmax)) vmax = x[j];
  }
  return vmax;
}

// q[j] = x[j] * id rounded and clamped to +-127 (see clamp_round_127), for j < N.
template <int N>
inline void quantize_127(const float* x, float id, int8_t* q) {
  for (int j = 0; j < N; ++j)
    q[j] = static_cast<int8_t>(static_cast<int>(clamp_round_127(x[j] * id)));
}

}  // namespace hearth::quant::ref
