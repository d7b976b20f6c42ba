// Q4_K reference: 256-element super-blocks of 8 x 32 with 6-bit scales and mins.
#include "hearth/quant/block_formats.h"
#include "hearth/quant/k_quant_common.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

namespace {
int q4_at(const BlockQ4_K& b, int sb, int l) {
  return k_nibble(b.qs, sb, l);
}

void store_q4(const uint8_t* q, BlockQ4_K& b) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
  }
}
}  // namespace

void q4_k_to_float(const void* src, float* dst, int64_t n) {
  k_row_to_float<BlockQ4_K, q4_at>(src, dst, n);
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  k_row_quantize<BlockQ4_K, 15, store_q4>(src, dst, n);
}

void dot_q4_k_q8_k(int64_t n, const void* w, const void* a, float* out) {
  k_row_dot<BlockQ4_K, q4_at>(n, w, a, out);
}

}  // namespace hearth::quant::ref
