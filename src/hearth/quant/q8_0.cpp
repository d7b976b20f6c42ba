// Q8_0 reference: 32 int8 quants with one fp16 scale.
#include <algorithm>
#include <cmath>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/reference_kernels.h"
#include "hearth/quant/rounding.h"

namespace hearth::quant::ref {

void q8_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);  // (n / 32) blocks
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float d = half_to_float(b[i].d);
    for (int j = 0; j < kQK0; ++j) dst[i * kQK0 + j] = d * static_cast<float>(b[i].qs[j]);
  }
}

// On the decode path for Q8_0/Q4_0 weights; written to vectorize (see quantize_q8_k).
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);  // (n / 32) blocks
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    float part[8] = {};
    for (int j = 0; j < kQK0; j += 8) {
      for (int k = 0; k < 8; ++k) part[k] = std::max(part[k], std::fabs(x[j + k]));
    }
    float amax = 0;
    for (float p : part) amax = std::max(amax, p);
    // Quantize against the fp16-rounded scale so the stored d is the one the quants assume.
    const uint16_t dh = float_to_half(amax / 127.0f);
    const float d = half_to_float(dh);
    const float id = d > 0 ? 1.0f / d : 0.0f;
    b[i].d = dh;
    for (int j = 0; j < kQK0; ++j) {
      // Clamped to +-127: kernels rely on activations never being -128 (see dot kernels).
      b[i].qs[j] = static_cast<int8_t>(static_cast<int>(clamp_round_127(x[j] * id)));
    }
  }
}

void dot_q8_0_q8_0(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQK0; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < kQK0; ++j) isum += x[i].qs[j] * y[i].qs[j];
    s += half_to_float(x[i].d) * half_to_float(y[i].d) * static_cast<float>(isum);
  }
  *out = s;
}

}  // namespace hearth::quant::ref
