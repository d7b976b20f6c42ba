// avx2 instantiation of rope_simd.h.
#include "hearth/compute/rope.h"
#include "hearth/compute/rope_simd.h"

namespace hearth::compute::detail {

void rope_heads_avx2(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                     int n_rot, RopeOrder order) {
  simd::rope_heads_impl(x, n_heads, head_dim, cos, sin, n_rot, order);
}

}  // namespace hearth::compute::detail
