// Q4_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cmath>
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using L = Rows16Q4_K;

// Row r's share of a group block column g, from the row's GGUF block b.
void pack_block(const BlockQ4_K& b, uint8_t* g, int r) {
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

void unpack_block(const uint8_t* g, int r, BlockQ4_K& b) {
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

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  rows16_prepare_q8_k<L>(cols, act_row, dst, [](const BlockQ8_K& a, uint8_t* sums) {
    for (int j = 0; j < 8; ++j) {
      // Sum of the 32 quants of sub-block j (|sum| <= 32 * 127: fits int16).
      const auto bsum = static_cast<int16_t>(a.bsums[2 * j] + a.bsums[2 * j + 1]);
      std::memcpy(sums + 2 * j, &bsum, 2);
    }
  });
}

// One block column's step of the scalar kernel, for row r and one token (ab: its prepared
// activation block).
float block_dot(const uint8_t* g, int r, const uint8_t* ab, float acc) {
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
  return std::fma(-(half_to_float(dmh) * da), static_cast<float>(s2), acc);
}

}  // namespace

constinit const Rows16 kRows16Q4_KScalar =
    rows16_scalar<L, BlockQ4_K, pack_block, unpack_block, prepare_act, block_dot>();

}  // namespace hearth::quant
