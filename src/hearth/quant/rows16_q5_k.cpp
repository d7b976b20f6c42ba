// Q5_K row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h: Q4_K's with the high bits before the low 4
// bits; the pieces Q4_K shares are in rows16_common.h).
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using L = Rows16Q5_K;
constexpr int kHighBits = kRows16Q5_KHighBits;

// Row r's share of a group block column g, from the row's GGUF block b.
void pack_block(const BlockQ5_K& b, uint8_t* g, int r) {
  rows16_pack_q4_k_part<kRows16Q5_KQuants>(b, g, r);
  rows16_pack_q5_k_high_bits<kHighBits>(b.qh, g, r);
  rows16_mix_q5_k<kRows16Q5_KQuants, kHighBits>(g, 4 * r, 4 * r + 4);
}

void unpack_block(const uint8_t* g, int r, BlockQ5_K& b) {
  // The block column back in Q4_K's arrangement (only row r's bytes are read).
  uint8_t copy[L::kBlockBytes];
  std::memcpy(copy, g, sizeof copy);
  rows16_unmix_q5_k<kRows16Q5_KQuants, kHighBits>(copy, 4 * r, 4 * r + 4);
  g = copy;
  rows16_unpack_q4_k_part<kRows16Q5_KQuants>(g, r, b);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < 4; ++i) {
        const uint8_t from = g[kHighBits + 128 * p + 64 * c + 4 * r + i];
        for (int s = 0; s < 4; ++s) {
          b.qh[4 * (4 * c + s) + i] |= static_cast<uint8_t>(((from >> (2 * s)) & 3) << (2 * p));
        }
      }
    }
  }
}

}  // namespace

constinit const Rows16 kRows16Q5_KScalar =
    rows16_scalar<L, BlockQ5_K, pack_block, unpack_block, rows16_prepare_q4_k<L>,
                  rows16_q4_k_block_dot<kRows16Q5_KQuants, kHighBits>>();

}  // namespace hearth::quant
