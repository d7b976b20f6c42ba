#include "hearth/compute/activation.h"

#include <cmath>

#include "hearth/compute/isa_dispatch.h"

namespace hearth::compute {

namespace ref {

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void add_scaled(float* y, const float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}

}  // namespace ref

void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, silu_mul, gate, up, out, n);
  ref::silu_mul(gate, up, out, n);
}

void add(const float* a, const float* b, float* out, int64_t n, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, add, a, b, out, n);
  ref::add(a, b, out, n);
}

void add_scaled(float* y, const float* x, float s, int64_t n, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, add_scaled, y, x, s, n);
  ref::add_scaled(y, x, s, n);
}

}  // namespace hearth::compute
