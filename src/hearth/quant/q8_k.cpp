// Q8_K reference: the activation format of the K-quant dots (f32 scale, 256 int8, group sums).
#include "hearth/quant/act_quant_common.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

void q8_k_to_float(const void* src, float* dst, int64_t n) {
  dequantize_blocks<BlockQ8_K>(src, dst, n, [](const BlockQ8_K& b, float* y) {
    for (int j = 0; j < kQKK; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
  });
}

// Activations are quantized once per matvec on the caller's thread, so this loop is on the
// decode path: it is written so the baseline compiler vectorizes it (8 partial maxima, and
// rounding through the float adder instead of a libm call).
void quantize_q8_k(const float* src, void* dst, int64_t n) {
  quantize_blocks<BlockQ8_K>(src, dst, n, [](const float* x, BlockQ8_K& b) {
    // Symmetric +-127: the SIMD kernels multiply u8 x s8 pairs and must never see -128.
    quantize_127<kQKK>(x, set_act_scale(b, abs_max<kQKK>(x)), b.qs);
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * g + j];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
  });
}

}  // namespace hearth::quant::ref
