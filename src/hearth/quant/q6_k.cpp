// Q6_K reference: 256-element super-blocks of 16 x 16 with int8 scales, 6-bit quants.
#include <algorithm>
#include <cmath>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/ref_blocks.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

namespace {
// Quant of element e (0..255), 0..63 (the stored value; the weight is q - 32).
inline int q6_at(const BlockQ6_K& b, int e) {
  const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
  const uint8_t lo_byte = b.ql[64 * h + 32 * (quarter & 1) + l];
  const int lo4 = quarter < 2 ? lo_byte & 0x0f : lo_byte >> 4;
  const int hi2 = (b.qh[32 * h + l] >> (2 * quarter)) & 3;
  return lo4 | (hi2 << 4);
}
}  // namespace

void q6_k_to_float(const void* src, float* dst, int64_t n) {
  dequantize_blocks<BlockQ6_K>(src, dst, n, [](const BlockQ6_K& b, float* y) {
    const float d = half_to_float(b.d);
    for (int e = 0; e < kQKK; ++e)
      y[e] = d * b.scales[e / 16] * static_cast<float>(q6_at(b, e) - 32);
  });
}

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  quantize_blocks<BlockQ6_K>(src, dst, n, [](const float* x, BlockQ6_K& b) {
    // Per group of 16 the value of largest magnitude maps to -32, the unpaired level.
    float gscale[16];
    float max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
      gscale[g] = largest_magnitude(x + 16 * g, 16) / -32.0f;
      max_abs_scale = std::max(max_abs_scale, std::fabs(gscale[g]));
    }
    const uint16_t dh = float_to_half(max_abs_scale / 127.0f);
    const float d = half_to_float(dh);
    b.d = dh;
    uint8_t q[kQKK];  // (256) stored quants 0..63
    for (int g = 0; g < 16; ++g) {
      const float sc = d > 0 ? std::clamp(std::nearbyint(gscale[g] / d), -127.0f, 127.0f) : 0.0f;
      b.scales[g] = static_cast<int8_t>(sc);
      const float step = d * sc;
      const float inv = step != 0 ? 1.0f / step : 0.0f;
      for (int l = 0; l < 16; ++l) {
        const float v = std::clamp(std::nearbyint(x[16 * g + l] * inv), -32.0f, 31.0f);
        q[16 * g + l] = static_cast<uint8_t>(static_cast<int>(v) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* qq = q + 128 * h;
        b.ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 0x0f) | ((qq[64 + l] & 0x0f) << 4));
        b.ql[64 * h + 32 + l] =
            static_cast<uint8_t>((qq[32 + l] & 0x0f) | ((qq[96 + l] & 0x0f) << 4));
        b.qh[32 * h + l] =
            static_cast<uint8_t>((qq[l] >> 4) | ((qq[32 + l] >> 4) << 2) |
                                 ((qq[64 + l] >> 4) << 4) | ((qq[96 + l] >> 4) << 6));
      }
    }
  });
}

void dot_q6_k_q8_k(int64_t n, const void* w, const void* a, float* out) {
  dot_blocks_chained<BlockQ6_K, BlockQ8_K>(
      n, w, a, out, [](float acc, const BlockQ6_K& x, const BlockQ8_K& y) {
        int32_t isum = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) dot += (q6_at(x, 16 * g + l) - 32) * y.qs[16 * g + l];
          isum += x.scales[g] * dot;
        }
        return q6_k_block_step(acc, half_to_float(x.d), y.d, isum);
      });
}

}  // namespace hearth::quant::ref
