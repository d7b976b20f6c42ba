// Helpers shared by the Q4_K and Q5_K reference formats (internal).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/ref_blocks.h"

namespace hearth::quant::ref {

// Quantizes one 256-element super-block as 8 sub-blocks of 32 with x ~ d*sc*q - dmin*m,
// q in [0, nmax]. Writes d, dmin, the packed scales and q (one byte per element) to q_out.
// Plain min/max per sub-block: not llama.cpp's search, but always a valid, accurate block.
inline void quantize_k_superblock(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                                  uint8_t scales_out[12], uint8_t q_out[kQKK]) {
  float scale[8], offset[8];  // per sub-block step and -min (min clipped to <= 0)
  float max_scale = 0, max_offset = 0;
  for (int s = 0; s < 8; ++s) {
    float lo = 0, hi = -INFINITY;
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * s + l]);
      hi = std::max(hi, x[32 * s + l]);
    }
    hi = std::max(hi, lo);
    scale[s] = (hi - lo) / static_cast<float>(nmax);
    offset[s] = -lo;
    max_scale = std::max(max_scale, scale[s]);
    max_offset = std::max(max_offset, offset[s]);
  }
  const uint16_t dh = float_to_half(max_scale / 63.0f);
  const uint16_t dminh = float_to_half(max_offset / 63.0f);
  const float d = half_to_float(dh), dmin = half_to_float(dminh);
  uint8_t sc[8], m[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d > 0 ? static_cast<uint8_t>(std::clamp(std::nearbyint(scale[s] / d), 0.0f, 63.0f)) : 0;
    m[s] = dmin > 0
               ? static_cast<uint8_t>(std::clamp(std::nearbyint(offset[s] / dmin), 0.0f, 63.0f))
               : 0;
    const float step = d * sc[s];
    const float shift = dmin * m[s];
    const float inv = step > 0 ? 1.0f / step : 0.0f;
    for (int l = 0; l < 32; ++l) {
      const float q = std::nearbyint((x[32 * s + l] + shift) * inv);
      q_out[32 * s + l] = static_cast<uint8_t>(std::clamp(q, 0.0f, static_cast<float>(nmax)));
    }
  }
  *d_out = dh;
  *dmin_out = dminh;
  pack_q4k_scales(sc, m, scales_out);
}

// The low 4 bits of the quant of element l (0..31) of sub-block sb (0..7) in the Q4_K/Q5_K
// nibble order: sub-blocks 2c and 2c+1 share the bytes qs[32c, 32c+32), low and high nibbles.
inline int k_nibble(const uint8_t* qs, int sb, int l) {
  return (qs[32 * (sb / 2) + l] >> (4 * (sb % 2))) & 0x0f;
}

// Dequantizes a row of Q4_K or Q5_K blocks: x = d * sc[sb] * q - dmin * m[sb] for element l of
// sub-block sb, with q = quant_at(block, sb, l).
template <class Block, int (*quant_at)(const Block&, int, int)>
inline void k_row_to_float(const void* src, float* dst, int64_t n) {
  dequantize_blocks<Block>(src, dst, n, [](const Block& b, float* y) {
    const float d = half_to_float(b.d), dmin = half_to_float(b.dmin);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(b.scales, sc, m);
    for (int sb = 0; sb < 8; ++sb) {
      for (int l = 0; l < 32; ++l) {
        y[32 * sb + l] = d * sc[sb] * static_cast<float>(quant_at(b, sb, l)) - dmin * m[sb];
      }
    }
  });
}

// Quantizes a row of Q4_K or Q5_K blocks: quantize_k_superblock with quants 0..nmax, which
// store(q, block) packs into the block's bits.
template <class Block, int nmax, void (*store)(const uint8_t* q, Block& b)>
inline void k_row_quantize(const float* src, void* dst, int64_t n) {
  quantize_blocks<Block>(src, dst, n, [](const float* x, Block& b) {
    uint8_t q[kQKK];  // (256) one quant per byte
    quantize_k_superblock(x, nmax, &b.d, &b.dmin, b.scales, q);
    store(q, b);
  });
}

// acc after a Q4_K or Q5_K block against a Q8_K block (block_steps.h), where sub_dot(s) is the
// integer dot of sub-block s's quants with its 32 activations. The mins come from the
// activation group sums.
template <class Block, class SubDot>
inline float k_block_dot(float acc, const Block& x, const BlockQ8_K& y, SubDot sub_dot) {
  uint8_t sc[8], m[8];
  unpack_q4k_scales(x.scales, sc, m);
  int32_t isum = 0, imin = 0;  // sum sc*q*a, sum m*a
  for (int sb = 0; sb < 8; ++sb) {
    isum += sc[sb] * sub_dot(sb);
    imin += m[sb] * (y.bsums[2 * sb] + y.bsums[2 * sb + 1]);
  }
  return k_block_step(acc, half_to_float(x.d), half_to_float(x.dmin), y.d, isum, imin);
}

// The dot of a row of Q4_K or Q5_K blocks with a row of Q8_K blocks, q = quant_at(block, sb, l).
template <class Block, int (*quant_at)(const Block&, int, int)>
inline void k_row_dot(int64_t n, const void* w, const void* a, float* out) {
  dot_blocks_chained<Block, BlockQ8_K>(n, w, a, out,
                                       [](float acc, const Block& x, const BlockQ8_K& y) {
                                         return k_block_dot(acc, x, y, [&](int sb) {
                                           int32_t dot = 0;
                                           for (int l = 0; l < 32; ++l)
                                             dot += quant_at(x, sb, l) * y.qs[32 * sb + l];
                                           return dot;
                                         });
                                       });
}

}  // namespace hearth::quant::ref
