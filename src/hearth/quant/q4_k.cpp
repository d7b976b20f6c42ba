// Q4_K reference: 256-element super-blocks of 8 x 32 with 6-bit scales and mins.
#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/k_quant_common.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

void q4_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(b[i].scales, sc, m);
    float* y = dst + i * kQKK;
    for (int c = 0; c < 4; ++c) {  // chunk c: sub-blocks 2c (low nibbles), 2c+1 (high)
      const uint8_t* q = b[i].qs + 32 * c;
      const float d1 = d * sc[2 * c], m1 = dmin * m[2 * c];
      const float d2 = d * sc[2 * c + 1], m2 = dmin * m[2 * c + 1];
      for (int l = 0; l < 32; ++l) {
        y[64 * c + l] = d1 * static_cast<float>(q[l] & 0x0f) - m1;
        y[64 * c + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      }
    }
  }
}

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t q[kQKK];  // (256) one quant per byte, 0..15
    quantize_k_superblock(src + i * kQKK, 15, &b[i].d, &b[i].dmin, b[i].scales, q);
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
      }
    }
  }
}

void dot_q4_k_q8_k(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_q4k_scales(x[i].scales, sc, m);
    int32_t isum = 0, imin = 0;  // sum sc*q*a, sum m*a
    for (int sb = 0; sb < 8; ++sb) {
      const uint8_t* q = x[i].qs + 32 * (sb / 2);
      const int shift = (sb % 2) * 4;
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += ((q[l] >> shift) & 0x0f) * y[i].qs[32 * sb + l];
      isum += sc[sb] * dot;
      imin += m[sb] * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
    }
    s += y[i].d * (half_to_float(x[i].d) * static_cast<float>(isum) -
                   half_to_float(x[i].dmin) * static_cast<float>(imin));
  }
  *out = s;
}

}  // namespace hearth::quant::ref
