// The block loop of the SIMD activation quantizers (act_quant_avx2.cpp, act_quant_avx512.cpp)
// and the scalar scale step of each activation format, which the reference quantizers
// (q8_k.cpp, q8_0.cpp) take from here too so that all of them give the same bits; the SIMD
// files supply the vector abs-max and quantization. Unnamed namespace: the files are
// compiled with different ISA flags.
#pragma once

#include <cstdint>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"

namespace hearth::quant {
namespace {

// Stores a Q8_K block's d for its largest |x|, amax, and returns the id its quants are
// x * id rounded: d = amax / 127, id = 127 / amax (0 for an all-zero block).
inline float set_act_scale(BlockQ8_K& b, float amax) {
  b.d = amax / 127.0f;
  return amax > 0 ? 127.0f / amax : 0.0f;
}

// The same for Q8_0: the fp16 d = amax / 127 and id = 1 / d, so the quants assume the
// fp16-rounded scale the block stores.
inline float set_act_scale(BlockQ8_0& b, float amax) {
  const uint16_t dh = float_to_half(amax / 127.0f);
  const float d = half_to_float(dh);
  b.d = dh;
  return d > 0 ? 1.0f / d : 0.0f;
}

// Quantizes a row of Q8_K or Q8_0 blocks: per block of floats x, abs_max(x, n) is the largest
// |x| and quant(x, id, block) writes the quants (and Q8_K's group sums) of x * id.
template <typename Block, typename AbsMax, typename Quant>
void quantize_act_blocks(const float* src, void* dst, int64_t n, AbsMax abs_max, Quant quant) {
  constexpr int qk = sizeof(Block::qs);
  auto* b = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / qk; ++i) {
    const float* x = src + i * qk;
    quant(x, set_act_scale(b[i], abs_max(x, qk)), b[i]);
  }
}

}  // namespace
}  // namespace hearth::quant
