// The block loops of the SIMD activation quantizers (act_quant_avx2.cpp, act_quant_avx512.cpp):
// the scalar scale steps, which must match the reference bit for bit, live here once; the
// files supply the vector abs-max and quantization. Unnamed namespace: the files are
// compiled with different ISA flags.
#pragma once

#include <cstdint>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"

namespace hearth::quant {
namespace {

// Q8_K: per 256 floats x, d = amax / 127 and quant(x, id, block) writes the block's quants
// and sums of x * id, with id = 127 / amax (0 for an all-zero block).
template <typename AbsMax, typename Quant>
void quantize_q8_k_blocks(const float* src, void* dst, int64_t n, AbsMax abs_max, Quant quant) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const float* x = src + i * kQKK;
    const float amax = abs_max(x, kQKK);
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    b[i].d = amax / 127.0f;
    quant(x, id, b[i]);
  }
}

// Q8_0: per 32 floats x, the fp16 d = amax / 127, and quant(x, id, block) writes the quants of
// x * id with id = 1 / d: the reference quantizes against the fp16-rounded scale it stores.
template <typename AbsMax, typename Quant>
void quantize_q8_0_blocks(const float* src, void* dst, int64_t n, AbsMax abs_max, Quant quant) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK0; ++i) {
    const float* x = src + i * kQK0;
    const float amax = abs_max(x, kQK0);
    const uint16_t dh = float_to_half(amax / 127.0f);
    const float d = half_to_float(dh);
    b[i].d = dh;
    quant(x, d > 0 ? 1.0f / d : 0.0f, b[i]);
  }
}

}  // namespace
}  // namespace hearth::quant
