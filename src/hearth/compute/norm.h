// RMS normalisation of the residual stream (Llama / Qwen2 attn_norm, ffn_norm, output_norm).
#pragma once

#include <cstdint>

#include "hearth/compute/ops.h"

namespace hearth::compute {

// out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * weight[i]
// x, out: (n_rows, dim) f32, rows contiguous; weight: (dim) f32. out may alias x.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
             float eps, Isa isa = active_isa());

namespace ref {
// Sum of squares accumulated in double, as the float paths should approach.
void rmsnorm(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
             float eps);
}  // namespace ref

namespace detail {
void rmsnorm_avx2(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
                  float eps);
void rmsnorm_avx512(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
                    float eps);
}  // namespace detail

}  // namespace hearth::compute
