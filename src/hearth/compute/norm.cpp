#include "hearth/compute/norm.h"

#include <cmath>

#include "hearth/compute/isa_dispatch.h"

namespace hearth::compute {

void ref::rmsnorm(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
                  float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;  // (dim)
    float* outr = out + r * dim;    // (dim)
    double sum_sq = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float scale =
        static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) outr[i] = xr[i] * scale * weight[i];
  }
}

void rmsnorm(const float* x, const float* weight, float* out, int64_t n_rows, int64_t dim,
             float eps, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, rmsnorm, x, weight, out, n_rows, dim, eps);
  ref::rmsnorm(x, weight, out, n_rows, dim, eps);
}

}  // namespace hearth::compute
