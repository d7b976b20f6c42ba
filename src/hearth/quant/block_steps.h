// The float steps one row takes per block, shared by every kernel of both layouts: the
// rows16 lanes (rows16_q4_k_block_dot, rows16_q6_k.cpp, rows16_q8_0_block_dot, the Q4_0
// quads) and the GGUF-layout kernels of every ISA (reference, NEON, AVX2, AVX-512). Each
// kernel forms the block's exact integer sums in whatever order suits it, then calls these in
// block order starting from 0, so a row gets the same bits whichever layout and ISA computed it:
// matmul may repack GGUF rows into rows16 on the fly and still give each token matvec's bits, and
// devices of a ring that read different layouts agree (docs/kernels.md, "One set of float steps").
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

// Q8_0: sum = the block's (quants . activation); scale = d * da. scale and sum_f as separate
// operands, for kernels that form eight or sixteen blocks' scales and sums in vectors and then
// step through their lanes in block order.
inline float q8_0_block_step_f(float acc, float scale, float sum_f) {
  return std::fma(scale, sum_f, acc);
}
inline float q8_0_block_step(float acc, float d, float da, int32_t sum) {
  return q8_0_block_step_f(acc, d * da, static_cast<float>(sum));
}

// Q4_0: sum = the block's (quants - 8) . activation, scale = d * da, as for Q8_0; but the
// blocks go in quads of four consecutive blocks (a row's last quad may hold one to three),
// whose 18-byte blocks are too short for one dependent step each: a one-row kernel would
// wait on that chain. A quad's sum starts at fma(scale, sum_f, +0) for its first block and
// takes fma(scale, sum_f, q) for each next one, in block order; then the row's sum adds it,
// acc + q. The quads' own chains are independent of each other. Every term is an explicit fma
// and the add takes no product, so no compiler contraction can change the bits.
inline float q4_0_quad_first(float scale, float sum_f) {
  return std::fma(scale, sum_f, 0.0f);
}
inline float q4_0_quad_next(float q, float scale, float sum_f) {
  return std::fma(scale, sum_f, q);
}
inline float q4_0_quad_end(float acc, float q) {
  return acc + q;
}
// acc after the quad steps of n blocks (block i at scale(i), sum_f(i)), from a quad boundary.
template <typename Scale, typename SumF>
inline float q4_0_steps(float acc, int64_t n, Scale scale, SumF sum_f) {
  for (int64_t i = 0; i < n; i += 4) {
    float q = q4_0_quad_first(scale(i), sum_f(i));
    for (int64_t k = i + 1; k < i + 4 && k < n; ++k) q = q4_0_quad_next(q, scale(k), sum_f(k));
    acc = q4_0_quad_end(acc, q);
  }
  return acc;
}
// A whole row's sum.
template <typename Scale, typename SumF>
inline float q4_0_row_steps(int64_t n, Scale scale, SumF sum_f) {
  return q4_0_steps(0.0f, n, scale, sum_f);
}

}  // namespace hearth::quant
