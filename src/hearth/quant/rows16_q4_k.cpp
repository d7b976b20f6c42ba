// Q4_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cmath>
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace rows16_q4_k {

size_t group_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQKK) * kSbBytes;
}

void repack(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += kSbBytes) {
    for (int r = 0; r < kRows16; ++r) {
      const auto& b = reinterpret_cast<const BlockQ4_K*>(static_cast<const uint8_t*>(src) +
                                                         static_cast<size_t>(r) * src_row_bytes)[i];
      std::memcpy(g + 2 * r, &b.d, 2);
      std::memcpy(g + 32 + 2 * r, &b.dmin, 2);
      uint8_t sc[8], m[8];
      unpack_q4k_scales(b.scales, sc, m);
      for (int j = 0; j < 8; ++j) g[64 + 16 * j + r] = sc[j];
      for (int p = 0; p < 4; ++p) {
        g[192 + 32 * p + 2 * r] = m[2 * p];
        g[192 + 32 * p + 2 * r + 1] = m[2 * p + 1];
        for (int s = 0; s < 8; ++s)
          std::memcpy(g + 320 + 512 * p + 64 * s + 4 * r, b.qs + 32 * p + 4 * s, 4);
      }
    }
  }
}

void unpack(int64_t cols, const void* group, void* dst, size_t dst_row_bytes) {
  const auto* g = static_cast<const uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += kSbBytes) {
    for (int r = 0; r < kRows16; ++r) {
      auto& b = reinterpret_cast<BlockQ4_K*>(static_cast<uint8_t*>(dst) +
                                             static_cast<size_t>(r) * dst_row_bytes)[i];
      std::memcpy(&b.d, g + 2 * r, 2);
      std::memcpy(&b.dmin, g + 32 + 2 * r, 2);
      uint8_t sc[8], m[8];
      for (int j = 0; j < 8; ++j) sc[j] = g[64 + 16 * j + r];
      for (int p = 0; p < 4; ++p) {
        m[2 * p] = g[192 + 32 * p + 2 * r];
        m[2 * p + 1] = g[192 + 32 * p + 2 * r + 1];
        for (int s = 0; s < 8; ++s)
          std::memcpy(b.qs + 32 * p + 4 * s, g + 320 + 512 * p + 64 * s + 4 * r, 4);
      }
      pack_q4k_scales(sc, m, b.scales);
    }
  }
}

size_t act_bytes(int64_t cols) {
  return static_cast<size_t>(cols / kQKK) * kActSbBytes;
}

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  const auto* a = static_cast<const BlockQ8_K*>(act_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < cols / kQKK; ++i, out += kActSbBytes) {
    std::memset(out, 0, 16);
    std::memcpy(out, &a[i].d, 4);
    for (int j = 0; j < 8; ++j) {
      // Sum of the 32 quants of sub-block j (|sum| <= 32 * 127: fits int16).
      const auto bsum = static_cast<int16_t>(a[i].bsums[2 * j] + a[i].bsums[2 * j + 1]);
      std::memcpy(out + 16 + 2 * j, &bsum, 2);
    }
    std::memcpy(out + 32, a[i].qs, kQKK);
  }
}

void dot_scalar(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
                float* out, size_t out_stride) {
  const int64_t nsb = cols / kQKK;
  for (int t = 0; t < n_tokens; ++t) {
    const uint8_t* act = static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride;
    for (int r = 0; r < kRows16; ++r) {
      const uint8_t* g = static_cast<const uint8_t*>(group);
      float acc = 0;
      for (int64_t i = 0; i < nsb; ++i, g += kSbBytes) {
        const uint8_t* ab = act + static_cast<size_t>(i) * kActSbBytes;
        const auto* aq = reinterpret_cast<const int8_t*>(ab + 32);
        int32_t s1 = 0, s2 = 0;
        for (int j = 0; j < 8; ++j) {
          const int p = j / 2, shift = 4 * (j % 2);
          int32_t isum = 0;
          for (int e = 0; e < 32; ++e) {
            const uint8_t byte = g[320 + 512 * p + 64 * (e / 4) + 4 * r + e % 4];
            isum += ((byte >> shift) & 0x0f) * aq[32 * j + e];
          }
          s1 += g[64 + 16 * j + r] * isum;
          int16_t bsum;
          std::memcpy(&bsum, ab + 16 + 2 * j, 2);
          s2 += g[192 + 32 * p + 2 * r + j % 2] * bsum;
        }
        float da;
        std::memcpy(&da, ab, 4);
        uint16_t dh, dmh;
        std::memcpy(&dh, g + 2 * r, 2);
        std::memcpy(&dmh, g + 32 + 2 * r, 2);
        acc = std::fma(half_to_float(dh) * da, static_cast<float>(s1), acc);
        acc = std::fma(-(half_to_float(dmh) * da), static_cast<float>(s2), acc);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

}  // namespace rows16_q4_k

constinit const Rows16 kRows16Q4_KScalar = rows16_q4_k::with_dot(rows16_q4_k::dot_scalar);

}  // namespace hearth::quant
