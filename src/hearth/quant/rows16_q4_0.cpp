// Q4_0 row-interleaved layout: repack, unpack, activation preparation and the scalar
// reference kernel (layout in rows16_kernels.h).
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
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

// Row r's quants of block column g against one token's prepared activation block ab: the
// exact integer sum (the block's -8 * sum(a) correction plus nibbles times quants).
int32_t block_sum(const uint8_t* g, int r, const uint8_t* ab) {
  int32_t isum = rows16_load_i32(ab + 4);
  const auto* aq = reinterpret_cast<const int8_t*>(ab + 8);
  for (int e = 0; e < 16; ++e) {
    const uint8_t byte = g[32 + 64 * (e / 4) + 4 * r + e % 4];
    isum += (byte & 0x0f) * aq[e] + (byte >> 4) * aq[16 + e];
  }
  return isum;
}

// The scalar kernel: per row and token, the block sums through Q4_0's quad steps
// (q4_0_row_steps, block_steps.h), the bits of the GGUF-layout kernels.
void dot(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
         float* out, size_t out_stride) {
  const auto* g = static_cast<const uint8_t*>(group);
  for (int t = 0; t < n_tokens; ++t) {
    const uint8_t* act = static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride;
    for (int r = 0; r < kRows16; ++r) {
      const auto at = [&](int64_t b) { return g + static_cast<size_t>(b) * L::kBlockBytes; };
      const auto act_at = [&](int64_t b) {
        return act + static_cast<size_t>(b) * L::kActBlockBytes;
      };
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = q4_0_row_steps(
          cols / L::kBlockCols,
          [&](int64_t b) {
            uint16_t dw;
            std::memcpy(&dw, at(b) + 2 * r, 2);
            return half_to_float(dw) * rows16_load_f32(act_at(b));
          },
          [&](int64_t b) { return static_cast<float>(block_sum(at(b), r, act_at(b))); });
    }
  }
}

}  // namespace

constinit const Rows16 kRows16Q4_0Scalar = {rows16_group_bytes<L>,
                                            rows16_repack<L, BlockQ4_0, pack_block>,
                                            rows16_unpack<L, BlockQ4_0, unpack_block>,
                                            rows16_act_bytes<L>,
                                            prepare_act,
                                            dot,
                                            nullptr};

}  // namespace hearth::quant
