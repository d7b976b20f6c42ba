// Q8_K reference: the activation format of the K-quant dots (f32 scale, 256 int8, group sums).
#include <algorithm>
#include <cmath>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/reference_kernels.h"
#include "hearth/quant/rounding.h"

namespace hearth::quant::ref {

void q8_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(src);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    for (int j = 0; j < kQKK; ++j) dst[i * kQKK + j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

// Activations are quantized once per matvec on the caller's thread, so this loop is on the
// decode path: it is written so the baseline compiler vectorizes it (8 partial maxima, and
// rounding through the float adder instead of a libm call).
void quantize_q8_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    float part[8] = {};
    for (int j = 0; j < kQKK; j += 8) {
      for (int k = 0; k < 8; ++k) part[k] = std::max(part[k], std::fabs(x[j + k]));
    }
    float amax = 0;
    for (float p : part) amax = std::max(amax, p);
    // Symmetric +-127: the SIMD kernels multiply u8 x s8 pairs and must never see -128.
    const float d = amax / 127.0f;
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    b[i].d = d;
    for (int j = 0; j < kQKK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(static_cast<int>(clamp_round_127(x[j] * id)));
    }
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b[i].qs[16 * g + j];
      b[i].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace hearth::quant::ref
