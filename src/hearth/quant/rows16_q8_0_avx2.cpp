// Q8_0 row-interleaved kernel for AVX2 without VNNI: one row per 32-bit lane, rows 0-7 and
// 8-15 in two 256-bit halves. vpmaddubsw needs one unsigned operand, so each 4-byte group
// takes |w| (unsigned, up to 128) and a with w's sign: pair sums stay below 2^15
// (2 * 128 * 127), then vpmaddwd by ones widens to 32 bits. The integer sums are exact and
// the float steps per lane are the scalar reference (rows16_q8_0.cpp)'s, so the bits are the same.
#include <immintrin.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

constexpr size_t kActBlockBytes = Rows16Q8_0::kActBlockBytes;
constexpr size_t kBlockBytes = Rows16Q8_0::kBlockBytes;

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (measured here with
// HEARTH_ISA=avx2; no AVX2-only hardware to measure on).
constexpr int kPrefetchBytes = 4096;

struct Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    const int64_t nb = cols / kQK0;
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NT][2];
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, g += kBlockBytes) {
      // (8 slices, 2 halves): |w| and w itself (for its sign), 8 rows x 4 quants each.
      __m256i wabs[8][2], wsgn[8][2];
      for (int s = 0; s < 8; ++s) {
        for (int h = 0; h < 2; ++h) {
          __m256i raw =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 + 64 * s + 32 * h));
          // A block column is 544 bytes (8.5 lines): 9 prefetches cover it.
          if (h == 0) rows16_prefetch_beside(raw, g + kPrefetchBytes + 64 * s);
          if (h == 0 && s == 7) rows16_prefetch_beside(raw, g + kPrefetchBytes + 512);
          const __m256i w = _mm256_xor_si256(raw, flip);
          wabs[s][h] = _mm256_abs_epi8(w);
          wsgn[s][h] = w;
        }
      }
      const __m128i dh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g));
      const __m256 dw[2] = {
          _mm256_cvtph_ps(dh),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 16)))};
      for (int t = 0; t < NT; ++t) {
        const uint8_t* ab =
            act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * kActBlockBytes;
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int s = 0; s < 8; ++s) {
          const __m256i a4 = _mm256_set1_epi32(rows16_load_i32(ab + 8 + 4 * s));
          for (int h = 0; h < 2; ++h) {
            const __m256i p16 = _mm256_maddubs_epi16(wabs[s][h], _mm256_sign_epi8(a4, wsgn[s][h]));
            isum[h] = _mm256_add_epi32(isum[h], _mm256_madd_epi16(p16, ones));
          }
        }
        const __m256 da = _mm256_set1_ps(rows16_load_f32(ab));
        for (int h = 0; h < 2; ++h) {
          acc[t][h] =
              _mm256_fmadd_ps(_mm256_mul_ps(dw[h], da), _mm256_cvtepi32_ps(isum[h]), acc[t][h]);
        }
      }
    }
    for (int t = 0; t < NT; ++t) {
      _mm256_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t][0]);
      _mm256_storeu_ps(out + static_cast<size_t>(t) * out_stride + 8, acc[t][1]);
    }
  }
};

}  // namespace

void rows16_q8_0_dot_avx2(int64_t cols, const void* group, const void* acts, size_t act_stride,
                          int n_tokens, float* out, size_t out_stride) {
  rows16_dot<Kernel>(cols, group, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace hearth::quant
