// Q4_0 row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using L = Rows16Q4_0;

// Row r's share of a group block column g, from the row's GGUF block b: the quant bytes keep
// their nibbles as GGUF packs them, four bytes per slice.
void pack_block(const BlockQ4_0& b, uint8_t* g, int r) {
  std::memcpy(g + 2 * r, &b.d, 2);
  for (int s = 0; s < 4; ++s) std::memcpy(g + 32 + 64 * s + 4 * r, b.qs + 4 * s, 4);
}

void unpack_block(const uint8_t* g, int r, BlockQ4_0& b) {
  std::memcpy(&b.d, g + 2 * r, 2);
  for (int s = 0; s < 4; ++s) std::memcpy(b.qs + 4 * s, g + 32 + 64 * s + 4 * r, 4);
}

void prepare_act(int64_t cols, const void* act_row, void* dst) {
  rows16_prepare_q8_0<L>(cols, act_row, dst, -8);
}

// Row r's quants of block column g against one token's activation quants aq: the scalar
// kernel's integer sum (rows16_q8_0_block_dot adds the block's correction and scales it).
int32_t quant_sum(const uint8_t* g, int r, const int8_t* aq) {
  int32_t isum = 0;
  for (int e = 0; e < 16; ++e) {
    const uint8_t byte = g[32 + 64 * (e / 4) + 4 * r + e % 4];
    isum += (byte & 0x0f) * aq[e] + (byte >> 4) * aq[16 + e];
  }
  return isum;
}

}  // namespace

constinit const Rows16 kRows16Q4_0Scalar =
    rows16_scalar<L, BlockQ4_0, pack_block, unpack_block, prepare_act,
                  rows16_q8_0_block_dot<quant_sum>>();

}  // namespace hearth::quant
