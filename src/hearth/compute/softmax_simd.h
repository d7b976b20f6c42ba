// softmax written against simd::VecF; include only from simd_kernels.inc (the attention kernel
// there reuses the row kernel).
#pragma once

#include <cmath>

#include "hearth/compute/activation_simd.h"

namespace hearth::compute::simd {
namespace {

inline float max_row(const float* x, int64_t n) {
  constexpr int kL = VecF::kLanes;
  VecF m = VecF::set1(-INFINITY);
  int64_t i = 0;
  for (; i + kL <= n; i += kL) m = vmax(m, VecF::load(x + i));
  float max = reduce_max(m);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// x[i] = exp(x[i] - shift); returns the sum of the new values.
inline float exp_shift_sum(float* x, int64_t n, float shift) {
  constexpr int kL = VecF::kLanes;
  const VecF vs = VecF::set1(shift);
  VecF sum = VecF::zero();
  int64_t i = 0;
  for (; i + kL <= n; i += kL) {
    const VecF e = vexp(VecF::load(x + i) - vs);
    e.store(x + i);
    sum = sum + e;
  }
  if (i < n) {
    // The tail enters the same vector sum with its padding lanes zeroed, so position i
    // always lands in lane i % kLanes: the total does not depend on how many (zero-weight)
    // positions follow, which keeps masked prefill rows bit-identical to decode.
    const int rest = static_cast<int>(n - i);
    const VecF e = vexp(VecF::load_partial(x + i, rest) - vs).keep_first(rest);
    e.store_partial(x + i, rest);
    sum = sum + e;
  }
  return reduce_sum(sum);
}

inline void scale_row(float* x, int64_t n, float s) {
  constexpr int kL = VecF::kLanes;
  const VecF vs = VecF::set1(s);
  int64_t i = 0;
  for (; i + kL <= n; i += kL) (VecF::load(x + i) * vs).store(x + i);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    (VecF::load_partial(x + i, rest) * vs).store_partial(x + i, rest);
  }
}

inline void softmax_impl(float* x, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * n;  // (n)
    const float max = max_row(row, n);
    const float sum = exp_shift_sum(row, n, max);
    scale_row(row, n, 1.0f / sum);
  }
}

}  // namespace
}  // namespace hearth::compute::simd
