// rmsnorm written against simd::VecF; include only from simd_kernels.inc.
#pragma once

#include <cmath>

#include "hearth/compute/activation_simd.h"

namespace hearth::compute::simd {
namespace {

inline void rmsnorm_impl(const float* x, const float* weight, float* out, int64_t n_rows,
                         int64_t dim, float eps) {
  constexpr int kL = VecF::kLanes;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;  // (dim)
    float* outr = out + r * dim;    // (dim)
    // Two accumulators: shorter dependency chains and a pairwise-ish sum, so the float
    // total stays within a few ulp of the double reference for dims in the thousands.
    VecF acc0 = VecF::zero(), acc1 = VecF::zero();
    int64_t i = 0;
    for (; i + 2 * kL <= dim; i += 2 * kL) {
      const VecF a = VecF::load(xr + i), b = VecF::load(xr + i + kL);
      acc0 = fma(a, a, acc0);
      acc1 = fma(b, b, acc1);
    }
    for (; i < dim; i += kL) {
      const int n = dim - i < kL ? static_cast<int>(dim - i) : kL;
      const VecF a = VecF::load_partial(xr + i, n);
      acc0 = fma(a, a, acc0);
    }
    const float sum_sq = reduce_sum(acc0 + acc1);
    const VecF scale = VecF::set1(1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps));
    for (i = 0; i + kL <= dim; i += kL) {
      (VecF::load(xr + i) * scale * VecF::load(weight + i)).store(outr + i);
    }
    if (i < dim) {
      const int n = static_cast<int>(dim - i);
      (VecF::load_partial(xr + i, n) * scale * VecF::load_partial(weight + i, n))
          .store_partial(outr + i, n);
    }
  }
}

}  // namespace
}  // namespace hearth::compute::simd
