// Q8_0 reference: 32 int8 quants with one fp16 scale.
#include "hearth/base/half.h"
#include "hearth/quant/act_quant_common.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

void q8_0_to_float(const void* src, float* dst, int64_t n) {
  dequantize_blocks<BlockQ8_0>(src, dst, n, [](const BlockQ8_0& b, float* y) {
    const float d = half_to_float(b.d);
    for (int j = 0; j < kQK0; ++j) y[j] = d * static_cast<float>(b.qs[j]);
  });
}

// On the decode path for Q8_0/Q4_0 weights; written to vectorize (see quantize_q8_k).
void quantize_q8_0(const float* src, void* dst, int64_t n) {
  quantize_blocks<BlockQ8_0>(src, dst, n, [](const float* x, BlockQ8_0& b) {
    // Clamped to +-127: kernels rely on activations never being -128 (see dot kernels).
    quantize_127<kQK0>(x, set_act_scale(b, abs_max<kQK0>(x)), b.qs);
  });
}

void dot_q8_0_q8_0(int64_t n, const void* w, const void* a, float* out) {
  dot_blocks_chained<BlockQ8_0, BlockQ8_0>(
      n, w, a, out, [](float acc, const BlockQ8_0& x, const BlockQ8_0& y) {
        int32_t isum = 0;
        for (int j = 0; j < kQK0; ++j) isum += x.qs[j] * y.qs[j];
        return q8_0_block_step(acc, half_to_float(x.d), half_to_float(y.d), isum);
      });
}

}  // namespace hearth::quant::ref
