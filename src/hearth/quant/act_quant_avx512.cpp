// Activation quantizers (Q8_K, Q8_0) with AVX-512: every matvec quantizes its input row on
// the calling thread before the threads start, so this is serial time on the decode path.
// Bitwise the reference for every input: the
// same abs-max (maxps keeps its second operand on NaN, as the reference's std::max does),
// the same scalar scale, the clamp of rounding.h's clamp_round_127 and round to nearest even.
#include <immintrin.h>

#include "hearth/quant/act_quant_common.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/isa_kernels.h"

namespace hearth::quant {
namespace {

inline __m512 abs_ps(__m512 v) {
  return _mm512_castsi512_ps(
      _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff)));
}

// max(|x|) over n (a multiple of 16) floats; NaN elements are skipped as the reference does.
inline float abs_max(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) m = _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + j)), m);
  return _mm512_reduce_max_ps(m);
}

// 16 quants of x * id as int32: clamp, then round to nearest even (clamp_round_127's bits).
inline __m512i quant16(const float* x, __m512 id) {
  __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), id);
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  quantize_act_blocks<BlockQ8_K>(src, dst, n, abs_max, [](const float* x, float id, BlockQ8_K& b) {
    const __m512 vid = _mm512_set1_ps(id);
    for (int g = 0; g < kQKK / 16; ++g) {
      const __m512i q = quant16(x + 16 * g, vid);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * g), _mm512_cvtepi32_epi8(q));
      b.bsums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
  });
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  quantize_act_blocks<BlockQ8_0>(src, dst, n, abs_max, [](const float* x, float id, BlockQ8_0& b) {
    const __m512 vid = _mm512_set1_ps(id);
    for (int g = 0; g < kQK0 / 16; ++g) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * g),
                       _mm512_cvtepi32_epi8(quant16(x + 16 * g, vid)));
    }
  });
}

}  // namespace

QuantizeFn avx512_act_quantize(gguf::TensorType type) {
  return ActQuantizers{quantize_q8_k, quantize_q8_0}.find(type);
}

}  // namespace hearth::quant
