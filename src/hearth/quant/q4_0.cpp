// Q4_0 reference: 32 4-bit quants offset by 8 with one fp16 scale.
#include <algorithm>
#include <cmath>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

void q4_0_to_float(const void* src, float* dst, int64_t n) {
  dequantize_blocks<BlockQ4_0>(src, dst, n, [](const BlockQ4_0& b, float* y) {
    const float d = half_to_float(b.d);
    for (int j = 0; j < kQK0 / 2; ++j) {
      y[j] = d * static_cast<float>((b.qs[j] & 0x0f) - 8);
      y[j + 16] = d * static_cast<float>((b.qs[j] >> 4) - 8);
    }
  });
}

void quantize_q4_0(const float* src, void* dst, int64_t n) {
  quantize_blocks<BlockQ4_0>(src, dst, n, [](const float* x, BlockQ4_0& b) {
    // The value of largest magnitude maps to -8 (the one level without a positive twin),
    // which uses all 16 levels for it.
    const uint16_t dh = float_to_half(largest_magnitude(x, kQK0) / -8.0f);
    const float d = half_to_float(dh);
    const float id = d != 0 ? 1.0f / d : 0.0f;
    b.d = dh;
    for (int j = 0; j < kQK0 / 2; ++j) {
      const int q0 = static_cast<int>(std::clamp(std::nearbyint(x[j] * id) + 8, 0.0f, 15.0f));
      const int q1 = static_cast<int>(std::clamp(std::nearbyint(x[j + 16] * id) + 8, 0.0f, 15.0f));
      b.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  });
}

void dot_q4_0_q8_0(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  *out = q4_0_row_steps(
      n / kQK0, [&](int64_t i) { return half_to_float(x[i].d) * half_to_float(y[i].d); },
      [&](int64_t i) {
        int32_t isum = 0;
        for (int j = 0; j < kQK0 / 2; ++j) {
          isum += ((x[i].qs[j] & 0x0f) - 8) * y[i].qs[j];
          isum += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + 16];
        }
        return static_cast<float>(isum);
      });
}

}  // namespace hearth::quant::ref
