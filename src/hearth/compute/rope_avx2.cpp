// avx2 instantiation of rope_simd.h.
#include "hearth/compute/rope.h"
#include "hearth/compute/rope_simd.h"

namespace hearth::compute::detail {

void rope_head_avx2(float* x, const float* cos, const float* sin, int n_rot, RopeOrder order) {
  simd::rope_head_impl(x, cos, sin, n_rot, order);
}

}  // namespace hearth::compute::detail
