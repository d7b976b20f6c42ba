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

// Row r's share of a group block column g, from the row's GGUF block b. The high-bit byte of
// element i of slice quad c of pair p (rows16_kernels.h) gathers, from GGUF's qh (whose byte
// 4s + i holds bit j for element 4s + i of sub-block j), bits 2p and 2p + 1 of byte
// 4 (4c + s) + i into bits 2s and 2s + 1. Matmul repacks GGUF rows on the fly
// (compute/matmul.cpp), so the four bytes i < 4 go at once, one per byte of a word (the
// shifts move no bit into a neighbour byte that the mask keeps).
void pack_block(const BlockQ5_K& b, uint8_t* g, int r) {
  rows16_pack_q4_k_part<kRows16Q5_KQuants>(b, g, r);
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 2; ++c) {
      uint32_t out = 0;
      for (int s = 0; s < 4; ++s) {
        uint32_t from;
        std::memcpy(&from, b.qh + 4 * (4 * c + s), 4);
        out |= ((from >> (2 * p)) & 0x03030303u) << (2 * s);
      }
      std::memcpy(g + kHighBits + 128 * p + 64 * c + 4 * r, &out, 4);
    }
  }
}

void unpack_block(const uint8_t* g, int r, BlockQ5_K& b) {
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
