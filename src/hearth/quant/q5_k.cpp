// Q5_K reference: Q4_K with a fifth quant bit per element in qh.
#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/k_quant_common.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

namespace {
// Quant of element e (0..255) of a Q5_K block, 0..31.
inline int q5_at(const BlockQ5_K& b, int e) {
  const int c = e / 64, l = e % 32, high = (e % 64) / 32;
  const int lo4 = high ? b.qs[32 * c + l] >> 4 : b.qs[32 * c + l] & 0x0f;
  const int bit = (b.qh[l] >> (2 * c + high)) & 1;
  return lo4 | (bit << 4);
}
}  // namespace

void q5_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(src);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float d = half_to_float(b[i].d), dmin = half_to_float(b[i].dmin);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(b[i].scales, sc, m);
    for (int e = 0; e < kQKK; ++e) {
      const int sb = e / 32;
      dst[i * kQKK + e] = d * sc[sb] * static_cast<float>(q5_at(b[i], e)) - dmin * m[sb];
    }
  }
}

void quantize_q5_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);  // (n / 256) blocks
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t q[kQKK];  // (256) one quant per byte, 0..31
    quantize_k_superblock(src + i * kQKK, 31, &b[i].d, &b[i].dmin, b[i].scales, q);
    for (int l = 0; l < 32; ++l) b[i].qh[l] = 0;
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int q0 = q[64 * c + l], q1 = q[64 * c + 32 + l];
        b[i].qs[32 * c + l] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        b[i].qh[l] |= static_cast<uint8_t>(((q0 >> 4) << (2 * c)) | ((q1 >> 4) << (2 * c + 1)));
      }
    }
  }
}

void dot_q5_k_q8_k(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ5_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float s = 0;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    unpack_q4k_scales(x[i].scales, sc, m);
    int32_t isum = 0, imin = 0;
    for (int sb = 0; sb < 8; ++sb) {
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) dot += q5_at(x[i], 32 * sb + l) * y[i].qs[32 * sb + l];
      isum += sc[sb] * dot;
      imin += m[sb] * (y[i].bsums[2 * sb] + y[i].bsums[2 * sb + 1]);
    }
    s += y[i].d * (half_to_float(x[i].d) * static_cast<float>(isum) -
                   half_to_float(x[i].dmin) * static_cast<float>(imin));
  }
  *out = s;
}

}  // namespace hearth::quant::ref
