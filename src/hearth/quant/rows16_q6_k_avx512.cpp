// Q6_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. Per 16-element group,
// three 64-byte loads hold the group's quants for 16 rows (two nibble vectors and one vector
// of the 2-bit high parts, layout in rows16_kernels.h); each of the four 4-element sets is
// rebuilt as bytes with one bit-select (vpternlogd), a mask and at most two shifts, then one
// vpdpbusd against the broadcast activation quants, starting from the group's -32 * sum(a)
// correction. The int8 group scale applies lane-wise. Same integer sums and float steps per
// lane as rows16_q6_k::dot_scalar.
#include <immintrin.h>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

using rows16_q6_k::kActSbBytes;
using rows16_q6_k::kSbBytes;

constexpr int kPrefetchBytes = 2048;

// (sel & a) | (~sel & b): ternary-logic truth table 0xCA with the selector first.
inline __m512i select_bits(__m512i sel, __m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(sel, a, b, 0xCA);
}

struct Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    const int64_t nsb = cols / kQKK;
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    const __m512i six = _mm512_set1_epi8(0x3f);
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nsb; ++i, g += kSbBytes) {
      for (int l = 0; l < 5; ++l) {
        _mm_prefetch(reinterpret_cast<const char*>(g) + kPrefetchBytes + 64 * l, _MM_HINT_T0);
      }
      const uint8_t* ab[NT];
      __m512i s[NT];
      for (int t = 0; t < NT; ++t) {
        ab[t] = act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(i) * kActSbBytes;
        s[t] = _mm512_setzero_si512();
      }
      for (int grp = 0; grp < 16; ++grp) {
        const uint8_t* v = g + 288 + 192 * grp;
        for (int l = 0; l < 3; ++l) {
          _mm_prefetch(reinterpret_cast<const char*>(v) + kPrefetchBytes + 64 * l, _MM_HINT_T0);
        }
        const __m512i na = _mm512_loadu_si512(v);
        const __m512i nb = _mm512_loadu_si512(v + 64);
        const __m512i hi = _mm512_loadu_si512(v + 128);
        // Bits 0-3 from the nibble vector, bits 4-5 from the high-bit vector shifted so the
        // set's two bits land there; bits 6-7 (another set's bits) masked off.
        const __m512i q1 = _mm512_and_si512(select_bits(low4, na, hi), six);
        const __m512i q2 = _mm512_and_si512(
            select_bits(low4, _mm512_srli_epi16(na, 4), _mm512_srli_epi16(hi, 2)), six);
        const __m512i q3 = _mm512_and_si512(select_bits(low4, nb, _mm512_slli_epi16(hi, 4)), six);
        const __m512i q4 = _mm512_and_si512(
            select_bits(low4, _mm512_srli_epi16(nb, 4), _mm512_slli_epi16(hi, 2)), six);
        const __m512i sc = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 32 + 16 * grp)));
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 80 + 16 * grp;
          __m512i x = _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * grp));
          x = _mm512_dpbusd_epi32(x, q1, _mm512_set1_epi32(rows16_load_i32(aq)));
          x = _mm512_dpbusd_epi32(x, q2, _mm512_set1_epi32(rows16_load_i32(aq + 4)));
          x = _mm512_dpbusd_epi32(x, q3, _mm512_set1_epi32(rows16_load_i32(aq + 8)));
          x = _mm512_dpbusd_epi32(x, q4, _mm512_set1_epi32(rows16_load_i32(aq + 12)));
          s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(sc, x));
        }
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
      for (int t = 0; t < NT; ++t) {
        const __m512 da = _mm512_set1_ps(rows16_load_f32(ab[t]));
        acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, da), _mm512_cvtepi32_ps(s[t]), acc[t]);
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
