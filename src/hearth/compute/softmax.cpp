#include "hearth/compute/softmax.h"

#include <cmath>

#include "hearth/compute/isa_dispatch.h"

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
  HEARTH_RETURN_ISA_VARIANT(isa, softmax, x, n_rows, n);
  ref::softmax(x, n_rows, n);
}

}  // namespace hearth::compute
