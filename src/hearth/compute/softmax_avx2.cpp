// avx2 instantiation of softmax_simd.h.
#include "hearth/compute/softmax.h"
#include "hearth/compute/softmax_simd.h"

namespace hearth::compute::detail {

void softmax_avx2(float* x, int64_t n_rows, int64_t n) {
  simd::softmax_impl(x, n_rows, n);
}

}  // namespace hearth::compute::detail
