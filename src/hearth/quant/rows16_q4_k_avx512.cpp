// Q4_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. A 64-byte load holds 4
// GGUF quant bytes of each of 16 rows; its low nibbles (& 0x0F) belong to sub-block 2p and
// its high nibbles (& 0xF0, i.e. 16x the nibble) to sub-block 2p + 1, each one vpdpbusd
// against the broadcast 4 activation quants; the x16 is shifted out exactly afterwards.
// Scales (u8) and mins (u8 pairs, vpmaddwd against the activation's sub-block sums) apply
// lane-wise. Same integer sums and float steps per lane as the scalar reference (rows16_q4_k.cpp).
#include <immintrin.h>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

constexpr size_t kActSbBytes = Rows16Q4_K::kActBlockBytes;
constexpr size_t kSbBytes = Rows16Q4_K::kBlockBytes;

// One prefetch per line consumed, this far ahead (rows16_prefetch_beside): side by side at 2
// threads (bench/ab_kernels.sh) 3 KiB streamed better than 4 KiB and 6 KiB.
constexpr int kPrefetchBytes = 3072;

struct Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    const int64_t nsb = cols / kQKK;
    const __m512i m_lo = _mm512_set1_epi8(0x0f);
    const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i, g += kSbBytes) {
      const uint8_t* ab[NT];
      for (int t = 0; t < NT; ++t) {
        ab[t] = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(i) * kActSbBytes;
      }
      __m512i s1[NT];
      for (int t = 0; t < NT; ++t) s1[t] = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        __m512i lo_sum[NT], hi_sum[NT];  // sub-block 2p, and 16x sub-block 2p + 1
        for (int t = 0; t < NT; ++t) lo_sum[t] = hi_sum[t] = _mm512_setzero_si512();
        const uint8_t* qp = g + 320 + 512 * p;
        for (int s = 0; s < 8; ++s) {
          __m512i v = _mm512_loadu_si512(qp + 64 * s);
          rows16_prefetch_beside(v, qp + kPrefetchBytes + 64 * s);
          // The super-block's 5 header lines (scales, mins, d) ride along the first loads.
          if (p == 0 && s < 5) rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * s);
          const __m512i lo = _mm512_and_si512(v, m_lo);
          const __m512i hi = _mm512_and_si512(v, m_hi);
          for (int t = 0; t < NT; ++t) {
            const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
            lo_sum[t] = _mm512_dpbusd_epi32(lo_sum[t], lo, _mm512_set1_epi32(rows16_load_i32(aq)));
            hi_sum[t] =
                _mm512_dpbusd_epi32(hi_sum[t], hi, _mm512_set1_epi32(rows16_load_i32(aq + 32)));
          }
        }
        const __m512i sc_lo = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p)));
        const __m512i sc_hi = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 16)));
        for (int t = 0; t < NT; ++t) {
          s1[t] = _mm512_add_epi32(
              s1[t], _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, lo_sum[t]),
                                      _mm512_mullo_epi32(sc_hi, _mm512_srai_epi32(hi_sum[t], 4))));
        }
      }
      __m512i s2[NT];
      for (int t = 0; t < NT; ++t) s2[t] = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) {
        const __m512i m16 = _mm512_cvtepu8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 192 + 32 * p)));
        for (int t = 0; t < NT; ++t) {
          s2[t] = _mm512_add_epi32(
              s2[t],
              _mm512_madd_epi16(m16, _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * p))));
        }
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
      const __m512 dm =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32)));
      for (int t = 0; t < NT; ++t) {
        const __m512 da = _mm512_set1_ps(rows16_load_f32(ab[t]));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(s1[t]), acc[t]);
        acc[t] = _mm512_fnmadd_ps(_mm512_mul_ps(dm, da), _mm512_cvtepi32_ps(s2[t]), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      _mm512_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t]);
    }
  }
};

}  // namespace

void rows16_q4_k_dot_avx512(int64_t cols, const void* group, const void* acts, size_t act_stride,
                            int n_tokens, float* out, size_t out_stride) {
  rows16_dot<Kernel>(cols, group, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace hearth::quant
