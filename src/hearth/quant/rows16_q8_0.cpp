// Q8_0 row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cmath>
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace rows16_q8_0 {

size_t group_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK0) * kBlockBytes;
}

void repack(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t b = 0; b < cols / kQK0; ++b, g += kBlockBytes) {
    for (int r = 0; r < kRows16; ++r) {
      const auto* row = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(src) +
                                                           static_cast<size_t>(r) * src_row_bytes);
      std::memcpy(g + 2 * r, &row[b].d, 2);
      // Four quants at a time (load time matters: a 70B model is tens of GB).
      for (int s = 0; s < 8; ++s) {
        uint32_t q4;
        std::memcpy(&q4, row[b].qs + 4 * s, 4);
        q4 ^= 0x80808080u;
        std::memcpy(g + 32 + 64 * s + 4 * r, &q4, 4);
      }
    }
  }
}

void unpack(int64_t cols, const void* group, void* dst, size_t dst_row_bytes) {
  const auto* g = static_cast<const uint8_t*>(group);
  for (int64_t b = 0; b < cols / kQK0; ++b, g += kBlockBytes) {
    for (int r = 0; r < kRows16; ++r) {
      auto* row = reinterpret_cast<BlockQ8_0*>(static_cast<uint8_t*>(dst) +
                                               static_cast<size_t>(r) * dst_row_bytes);
      std::memcpy(&row[b].d, g + 2 * r, 2);
      for (int e = 0; e < kQK0; ++e) {
        row[b].qs[e] = static_cast<int8_t>(g[32 + 64 * (e / 4) + 4 * r + e % 4] ^ 0x80u);
      }
    }
  }
}

size_t act_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQK0) * kActBlockBytes;
}

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  const auto* a = static_cast<const BlockQ8_0*>(act_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < cols / kQK0; ++b, out += kActBlockBytes) {
    const float d = half_to_float(a[b].d);
    int32_t sum = 0;
    for (int e = 0; e < kQK0; ++e) sum += a[b].qs[e];
    const int32_t corr = -128 * sum;
    std::memcpy(out, &d, 4);
    std::memcpy(out + 4, &corr, 4);
    std::memcpy(out + 8, a[b].qs, kQK0);
  }
}

void dot_scalar(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
                float* out, size_t out_stride) {
  const int64_t nb = cols / kQK0;
  for (int t = 0; t < n_tokens; ++t) {
    const uint8_t* act = static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride;
    for (int r = 0; r < kRows16; ++r) {
      const uint8_t* g = static_cast<const uint8_t*>(group);
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b, g += kBlockBytes) {
        const uint8_t* ab = act + static_cast<size_t>(b) * kActBlockBytes;
        float da;
        int32_t isum;
        std::memcpy(&da, ab, 4);
        std::memcpy(&isum, ab + 4, 4);
        const auto* aq = reinterpret_cast<const int8_t*>(ab + 8);
        for (int e = 0; e < kQK0; ++e) isum += g[32 + 64 * (e / 4) + 4 * r + e % 4] * aq[e];
        uint16_t dw;
        std::memcpy(&dw, g + 2 * r, 2);
        const float scale = half_to_float(dw) * da;
        acc = std::fma(scale, static_cast<float>(isum), acc);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

}  // namespace rows16_q8_0

constinit const Rows16 kRows16Q8_0Scalar = rows16_q8_0::with_dot(rows16_q8_0::dot_scalar);

}  // namespace hearth::quant
