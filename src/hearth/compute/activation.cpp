#include "hearth/compute/activation.h"

#include <cmath>

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

// The ISA variants are compiled only on x86; elsewhere every Isa falls back to scalar
// (isa_supported() never reports them there).
void silu_mul(const float* gate, const float* up, float* out, int64_t n, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return detail::silu_mul_avx512(gate, up, out, n);
  if (isa == Isa::kAvx2) return detail::silu_mul_avx2(gate, up, out, n);
#endif
  (void)isa;
  ref::silu_mul(gate, up, out, n);
}

void add(const float* a, const float* b, float* out, int64_t n, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return detail::add_avx512(a, b, out, n);
  if (isa == Isa::kAvx2) return detail::add_avx2(a, b, out, n);
#endif
  (void)isa;
  ref::add(a, b, out, n);
}

void add_scaled(float* y, const float* x, float s, int64_t n, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return detail::add_scaled_avx512(y, x, s, n);
  if (isa == Isa::kAvx2) return detail::add_scaled_avx2(y, x, s, n);
#endif
  (void)isa;
  ref::add_scaled(y, x, s, n);
}

}  // namespace hearth::compute
