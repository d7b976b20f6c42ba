#include "hearth/compute/softmax.h"

#include <cmath>

namespace hearth::compute {

void ref::softmax(float* x, int64_t n_rows, int64_t n) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * n;  // (n)
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, row[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      row[i] = std::exp(row[i] - max);
      sum += row[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) row[i] *= inv;
  }
}

void softmax(float* x, int64_t n_rows, int64_t n, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return detail::softmax_avx512(x, n_rows, n);
  if (isa == Isa::kAvx2) return detail::softmax_avx2(x, n_rows, n);
#endif
  (void)isa;
  ref::softmax(x, n_rows, n);
}

}  // namespace hearth::compute
