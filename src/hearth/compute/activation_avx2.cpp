// avx2 instantiation of the elementwise kernels in activation_simd.h.
#include "hearth/compute/activation.h"
#include "hearth/compute/activation_simd.h"

namespace hearth::compute::detail {

void silu_mul_avx2(const float* gate, const float* up, float* out, int64_t n) {
  simd::silu_mul_impl(gate, up, out, n);
}
void add_avx2(const float* a, const float* b, float* out, int64_t n) {
  simd::add_impl(a, b, out, n);
}
void add_scaled_avx2(float* y, const float* x, float s, int64_t n) {
  simd::add_scaled_impl(y, x, s, n);
}

}  // namespace hearth::compute::detail
