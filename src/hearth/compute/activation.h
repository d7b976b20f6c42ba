// Elementwise ops of the feed-forward block and the residual stream.
#pragma once

#include <cstdint>

#include "hearth/compute/ops.h"

namespace hearth::compute {

// SwiGLU: out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
// gate, up, out: (n) f32; out may alias gate or up.
void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa = active_isa());
// out[i] = a[i] + b[i]. a, b, out: (n) f32; out may alias a or b.
void add(const float* a, const float* b, float* out, int64_t n, Isa isa = active_isa());
// y[i] += s * x[i]. y, x: (n) f32.
void add_scaled(float* y, const float* x, float s, int64_t n, Isa isa = active_isa());

namespace ref {
void silu_mul(const float* gate, const float* up, float* out, int64_t n);
void add(const float* a, const float* b, float* out, int64_t n);
void add_scaled(float* y, const float* x, float s, int64_t n);
}  // namespace ref

namespace detail {
void silu_mul_avx2(const float* gate, const float* up, float* out, int64_t n);
void add_avx2(const float* a, const float* b, float* out, int64_t n);
void add_scaled_avx2(float* y, const float* x, float s, int64_t n);
void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t n);
void add_avx512(const float* a, const float* b, float* out, int64_t n);
void add_scaled_avx512(float* y, const float* x, float s, int64_t n);
}  // namespace detail

}  // namespace hearth::compute
