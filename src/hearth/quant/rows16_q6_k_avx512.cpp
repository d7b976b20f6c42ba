// Q6_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. Each slice step loads
// three vectors (4 bytes of each of 16 rows each) that hold the unsigned 6-bit quants of
// four 4-element slices, one per quarter (three masked out directly, the fourth gathered
// from their top bits); each is one vpdpbusd against the broadcast 4 activation quants into
// the sum of its 16-element group, started at the activation's -32 * sum so the weights'
// offset costs nothing here. The int8 group scales apply lane-wise. Same integer sums and
// float steps per lane as rows16_q6_k::dot_scalar.
#include <immintrin.h>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using rows16_q6_k::kActSbBytes;
using rows16_q6_k::kSbBytes;

// Prefetch distance: one super-block column (3.25 KiB). At 2 threads 2 KiB measured within
// noise of it, 4 and 6.5 KiB a few percent lower, none at all 0.10-0.15 of the read lower.
constexpr int kPrefetchBytes = static_cast<int>(kSbBytes);

// vpternlogd truth table of a | (b & c).
constexpr int kOrAnd = 0xF8;

struct Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    const int64_t nsb = cols / kQKK;
    const uint8_t* d_col = g + static_cast<size_t>(nsb) * kSbBytes;  // (nsb, 16) fp16 d
    const __m512i m_3f = _mm512_set1_epi8(0x3f);
    const __m512i m_c0 = _mm512_set1_epi8(static_cast<char>(0xc0));
    const __m512i m_0c = _mm512_set1_epi8(0x0c);
    const __m512i m_30 = _mm512_set1_epi8(0x30);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i, g += kSbBytes, d_col += 32) {
      // The lines kPrefetchBytes ahead: 3 per slice step and the 4 scale lines here.
      const char* pf = reinterpret_cast<const char*>(g) + kPrefetchBytes;
      for (int l = 48; l < 52; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(d_col) + 512, _MM_HINT_T0);
      const uint8_t* ab[NT];
      for (int t = 0; t < NT; ++t) {
        ab[t] = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(i) * kActSbBytes;
      }
      __m512i isum[NT];
      for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        for (int half = 0; half < 2; ++half) {  // slices j = 4 * half .. 4 * half + 3
          // Group 8h + 2q + half of each token: quarter q's four slices.
          __m512i gsum[4][NT];
          for (int q = 0; q < 4; ++q) {
            for (int t = 0; t < NT; ++t) {
              gsum[q][t] =
                  _mm512_set1_epi32(rows16_load_i32(ab[t] + 260 + 4 * (8 * h + 2 * q + half)));
            }
          }
          for (int j = 4 * half; j < 4 * half + 4; ++j) {
            const uint8_t* sp = g + 192 * (8 * h + j);  // the slice's three vectors
            for (int l = 0; l < 3; ++l) _mm_prefetch(pf + 64 * (3 * (8 * h + j) + l), _MM_HINT_T0);
            const __m512i b0 = _mm512_loadu_si512(sp);
            const __m512i b1 = _mm512_loadu_si512(sp + 64);
            const __m512i b2 = _mm512_loadu_si512(sp + 128);
            // Quarters 0..2: the low 6 bits. Quarter 3: the top 2 bits of b0, b1, b2 at bits
            // 0-1, 2-3, 4-5 (16-bit shifts: the bits they carry across bytes are masked off).
            __m512i qv[4];
            qv[0] = _mm512_and_si512(b0, m_3f);
            qv[1] = _mm512_and_si512(b1, m_3f);
            qv[2] = _mm512_and_si512(b2, m_3f);
            const __m512i q3_lo = _mm512_srli_epi16(_mm512_and_si512(b0, m_c0), 6);
            qv[3] = _mm512_ternarylogic_epi32(
                _mm512_ternarylogic_epi32(q3_lo, _mm512_srli_epi16(b1, 4), m_0c, kOrAnd),
                _mm512_srli_epi16(b2, 2), m_30, kOrAnd);
            for (int q = 0; q < 4; ++q) {
              for (int t = 0; t < NT; ++t) {
                const uint8_t* aq = ab[t] + 128 * h + 32 * q + 4 * j;
                gsum[q][t] =
                    _mm512_dpbusd_epi32(gsum[q][t], qv[q], _mm512_set1_epi32(rows16_load_i32(aq)));
              }
            }
          }
          for (int q = 0; q < 4; ++q) {
            // Scale of group 8h + 2q + half, sign-extended into each row's lane.
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(
                reinterpret_cast<const __m128i*>(g + 3072 + 16 * (8 * h + 2 * q + half))));
            for (int t = 0; t < NT; ++t) {
              isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(sc, gsum[q][t]));
            }
          }
        }
      }
      const __m512 dw =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d_col)));
      for (int t = 0; t < NT; ++t) {
        const __m512 da = _mm512_set1_ps(rows16_load_f32(ab[t] + 256));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(isum[t]), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      _mm512_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t]);
    }
  }
};

}  // namespace

constinit const Rows16 kRows16Q6_KAvx512 = rows16_q6_k::with_dot(rows16_dot<Kernel>);

}  // namespace hearth::quant
