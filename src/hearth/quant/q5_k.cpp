// Q5_K reference: Q4_K with a fifth quant bit per element in qh.
#include "hearth/quant/block_formats.h"
#include "hearth/quant/k_quant_common.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

namespace {
// Quant of element l of sub-block sb of a Q5_K block, 0..31: its high bit is bit sb of qh[l].
int q5_at(const BlockQ5_K& b, int sb, int l) {
  return k_nibble(b.qs, sb, l) | (((b.qh[l] >> sb) & 1) << 4);
}

void store_q5(const uint8_t* q, BlockQ5_K& b) {
  for (int l = 0; l < 32; ++l) b.qh[l] = 0;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
      b.qs[32 * c + l] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      b.qh[l] |= static_cast<uint8_t>(((q0 >> 4) << (2 * c)) | ((q1 >> 4) << (2 * c + 1)));
    }
  }
}
}  // namespace

void q5_k_to_float(const void* src, float* dst, int64_t n) {
  k_row_to_float<BlockQ5_K, q5_at>(src, dst, n);
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  k_row_quantize<BlockQ5_K, 31, store_q5>(src, dst, n);
}

void dot_q5_k_q8_k(int64_t n, const void* w, const void* a, float* out) {
  k_row_dot<BlockQ5_K, q5_at>(n, w, a, out);
}

}  // namespace hearth::quant::ref
