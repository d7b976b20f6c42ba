// The float steps one row takes per block, shared by every kernel of both layouts: the
// rows16 lanes (rows16_q4_k_block_dot, rows16_q6_k.cpp, rows16_q8_0_block_dot) and the
// GGUF-layout kernels of every ISA (reference, NEON, AVX2, AVX-512). Each kernel forms the
// block's exact integer sums in whatever order suits it, then calls these in block order
// starting from 0, so a row gets the same bits whichever layout and ISA computed it: matmul may
// repack GGUF rows into rows16 on the fly and still give each token matvec's bits, and devices
// of a ring that read different layouts agree (docs/kernels.md, "One set of float steps").
#pragma once

#include <cmath>
#include <cstdint>

namespace hearth::quant {

// Q4_K / Q5_K: scaled = sum over sub-blocks of scale * (quants . activation), mins = sum of
// min * (activation sub-block sum); d, dmin the block's, da the activation block's scale.
// scaled_f and mins_f: the sums converted to float (round to nearest, as static_cast and
// vcvtdq2ps do), for kernels that convert several blocks' sums in one vector op.
inline float k_block_step_f(float acc, float d, float dmin, float da, float scaled_f,
                            float mins_f) {
  acc = std::fma(d * da, scaled_f, acc);
  return std::fma(-(dmin * da), mins_f, acc);
}
inline float k_block_step(float acc, float d, float dmin, float da, int32_t scaled, int32_t mins) {
  return k_block_step_f(acc, d, dmin, da, static_cast<float>(scaled), static_cast<float>(mins));
}

// Q6_K: sum = sum over groups of scale * ((quants - 32) . activation); sum_f converted.
inline float q6_k_block_step_f(float acc, float d, float da, float sum_f) {
  return std::fma(d * da, sum_f, acc);
}
inline float q6_k_block_step(float acc, float d, float da, int32_t sum) {
  return q6_k_block_step_f(acc, d, da, static_cast<float>(sum));
}

// Q8_0 / Q4_0: sum = the block's (quants . activation), Q4_0's quants less their offset 8;
// scale = d * da. scale and sum_f as separate operands, for kernels that form eight or
// sixteen blocks' scales and sums in vectors and then step through their lanes in block order.
// Q4_0's GGUF kernels on x86 do not take it yet (TypeTraits::gguf_rows16_bits).
inline float q8_0_block_step_f(float acc, float scale, float sum_f) {
  return std::fma(scale, sum_f, acc);
}
inline float q8_0_block_step(float acc, float d, float da, int32_t sum) {
  return q8_0_block_step_f(acc, d * da, static_cast<float>(sum));
}

}  // namespace hearth::quant
