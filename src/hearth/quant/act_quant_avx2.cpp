// Activation quantizers (Q8_K, Q8_0) with AVX2: as act_quant_avx512.cpp (same reasons, same
// bits as the reference for every input), 8 lanes at a time.
#include <immintrin.h>

#include "hearth/quant/act_quant_common.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/isa_kernels.h"

namespace hearth::quant {
namespace {

inline float abs_max(const float* x, int n) {
  const __m256 mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  // maxps keeps its second operand when the first is NaN: NaN elements are skipped.
  for (int j = 0; j < n; j += 8) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), mask), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

// 8 quants of x * id as int32: clamp, then round to nearest even (clamp_round_127's bits).
inline __m256i quant8(const float* x, __m256 id) {
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
  return _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// 32 int32 quants (4 vectors, in order) narrowed to 32 int8 in order.
inline __m256i narrow32(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
  // packs work within 128-bit lanes; the permute restores element order.
  const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
  return _mm256_permutevar8x32_epi32(w, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

inline int32_t sum16(__m256i a, __m256i b) {
  const __m256i s = _mm256_add_epi32(a, b);
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

void quantize_q8_k(const float* src, void* dst, int64_t n) {
  quantize_act_blocks<BlockQ8_K>(src, dst, n, abs_max, [](const float* x, float id, BlockQ8_K& b) {
    const __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < kQKK; j += 32) {
      const __m256i q0 = quant8(x + j, vid), q1 = quant8(x + j + 8, vid);
      const __m256i q2 = quant8(x + j + 16, vid), q3 = quant8(x + j + 24, vid);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs + j), narrow32(q0, q1, q2, q3));
      b.bsums[j / 16] = static_cast<int16_t>(sum16(q0, q1));
      b.bsums[j / 16 + 1] = static_cast<int16_t>(sum16(q2, q3));
    }
  });
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  quantize_act_blocks<BlockQ8_0>(src, dst, n, abs_max, [](const float* x, float id, BlockQ8_0& b) {
    const __m256 vid = _mm256_set1_ps(id);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(b.qs),
        narrow32(quant8(x, vid), quant8(x + 8, vid), quant8(x + 16, vid), quant8(x + 24, vid)));
  });
}

}  // namespace

QuantizeFn avx2_act_quantize(gguf::TensorType type) {
  return ActQuantizers{quantize_q8_k, quantize_q8_0}.find(type);
}

}  // namespace hearth::quant
