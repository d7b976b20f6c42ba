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

// Lane-wise max(|x|) over n (a multiple of 16) floats; NaN elements are skipped as the
// reference does (maxps keeps its second operand on NaN), so no lane is NaN.
inline __m512 abs_max_lanes(const float* x, int n) {
  __m512 m = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) m = _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + j)), m);
  return m;
}

// max(|x|) over n (a multiple of 16) floats, NaN skipped.
inline float abs_max(const float* x, int n) {
  return _mm512_reduce_max_ps(abs_max_lanes(x, n));
}

// 16 quants of x * id as int32: clamp, then round to nearest even (clamp_round_127's bits).
inline __m512i quant16(const float* x, __m512 id) {
  __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), id);
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
  return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// Lane j: v[j]'s 16 lanes folded by op (max or add). Four rounds of shuffles halve the vectors
// each round (45 ops for 16 vectors, where folding each alone takes 8); the lanes end in the
// order 4c + r = vector c + 4r, which the last permute undoes. The callers' folds do not
// depend on the order: integer adds, and maxes of lanes that hold no NaN (abs_max_lanes
// skips them as the reference does).
template <typename Op>
inline __m512 fold_lanes(const __m512 (&v)[16], Op op) {
  __m512 a[8], b[4], c[2];
  for (int k = 0; k < 8; ++k) {  // halves: vectors 2k (chunks 0-1), 2k + 1 (chunks 2-3)
    a[k] = op(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
  }
  for (int k = 0; k < 4; ++k) {  // chunk c: vector 4k + c
    b[k] = op(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x88),
              _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xDD));
  }
  for (int k = 0; k < 2; ++k) {  // chunk c: vectors 8k + c (lanes 0-1), 8k + 4 + c (lanes 2-3)
    c[k] = op(_mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0x44),
              _mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0xEE));
  }
  const __m512 r = op(_mm512_shuffle_ps(c[0], c[1], 0x88),   // lane 4c + r: vector
                      _mm512_shuffle_ps(c[0], c[1], 0xDD));  // c + 4r
  const __m512i to_vector = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(to_vector, r);
}

// The group sums come from one fold of the block's 16 quant vectors (fold_lanes) rather than
// a horizontal add per group.
void quantize_q8_k(const float* src, void* dst, int64_t n) {
  quantize_act_blocks<BlockQ8_K>(src, dst, n, abs_max, [](const float* x, float id, BlockQ8_K& b) {
    const __m512 vid = _mm512_set1_ps(id);
    __m512 q[kQKK / 16];  // the int32 quants, as float vectors for fold_lanes' shuffles
    for (int g = 0; g < kQKK / 16; ++g) {
      const __m512i qi = quant16(x + 16 * g, vid);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * g), _mm512_cvtepi32_epi8(qi));
      q[g] = _mm512_castsi512_ps(qi);
    }
    const __m512 sums = fold_lanes(q, [](__m512 u, __m512 v) {
      return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(u), _mm512_castps_si512(v)));
    });
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.bsums),
                        _mm512_cvtepi32_epi16(_mm512_castps_si512(sums)));
  });
}

// Block b's 32 quants of x * id.
inline void quant_q8_0_block(const float* x, __m512 id, BlockQ8_0& b) {
  for (int g = 0; g < kQK0 / 16; ++g) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b.qs + 16 * g),
                     _mm512_cvtepi32_epi8(quant16(x + 16 * g, id)));
  }
}

// 16 Q8_0 blocks at once: their abs-maxes in one vector, then set_act_scale's steps in lanes
// (d = amax / 127 rounded to fp16 by vcvtps2ph, which rounds to nearest even as float_to_half
// does for every number; id = 1 / d, 0 where d is 0). The same bytes as 16 calls of the
// block path, whose horizontal max and scalar fp16 round trip per block were most of its time
// (docs/kernels.md, "Token chunks").
inline void quant_q8_0_16_blocks(const float* x, BlockQ8_0* b) {
  __m512 m[16];
  for (int j = 0; j < 16; ++j) m[j] = abs_max_lanes(x + kQK0 * j, kQK0);
  const __m512 amax = fold_lanes(m, [](__m512 u, __m512 v) { return _mm512_max_ps(u, v); });
  const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __m256i dh = _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 df = _mm512_cvtph_ps(dh);
  const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(df, _mm512_setzero_ps(), _CMP_GT_OQ),
                                        _mm512_set1_ps(1.0f), df);
  alignas(64) float ids[16];
  alignas(32) uint16_t dhs[16];
  _mm512_store_ps(ids, id);
  _mm256_store_si256(reinterpret_cast<__m256i*>(dhs), dh);
  for (int j = 0; j < 16; ++j) {
    b[j].d = dhs[j];
    quant_q8_0_block(x + kQK0 * j, _mm512_set1_ps(ids[j]), b[j]);
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  const int64_t n_blocks = n / kQK0;
  int64_t i = 0;
  for (; i + 16 <= n_blocks; i += 16) quant_q8_0_16_blocks(src + i * kQK0, b + i);
  quantize_act_blocks<BlockQ8_0>(src + i * kQK0, b + i, n - i * kQK0, abs_max,
                                 [](const float* x, float id, BlockQ8_0& blk) {
                                   quant_q8_0_block(x, _mm512_set1_ps(id), blk);
                                 });
}

}  // namespace

QuantizeFn avx512_act_quantize(gguf::TensorType type) {
  return ActQuantizers{quantize_q8_k, quantize_q8_0}.find(type);
}

}  // namespace hearth::quant
