// avx2 f32 -> f16 rounding for KvCache::store (F16C, nearest even: bit-exact with the
// scalar float_to_half, which is not called here so no inline copy of it gets avx2 code).
#include "hearth/compute/activation_simd.h"
#include "hearth/compute/kv_cache.h"

namespace hearth::compute::detail {

void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  using simd::VecF;
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) VecF::load(src + i).store_f16(dst + i);
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    uint16_t tail[VecF::kLanes];  // (kLanes) f16
    VecF::load_partial(src + i, rest).store_f16(tail);
    for (int j = 0; j < rest; ++j) dst[i + j] = tail[j];
  }
}

}  // namespace hearth::compute::detail
