// avx512 instantiation of norm_simd.h.
#include "hearth/compute/norm.h"
#include "hearth/compute/norm_simd.h"

namespace hearth::compute::detail {

void rmsnorm_avx512(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
                    float eps) {
  simd::rmsnorm_impl(x, weight, out, n_rows, dim, eps);
}

}  // namespace hearth::compute::detail
