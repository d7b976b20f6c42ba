// Q6_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. Per 16-element group,
// three 64-byte loads hold the group's quants for 16 rows (three 4-element sets whole in the
// low 6 bits, the fourth set in the top bits of all three; layout in rows16_kernels.h): 9
// vector ops rebuild the four sets as bytes, then one vpdpbusd each against the broadcast
// activation quants, starting from the group's -32 * sum(a)
// correction. The int8 group scale applies lane-wise. Same integer sums and float steps per
// lane as the scalar reference (rows16_q6_k.cpp).
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// (sel & a) | (~sel & b): ternary-logic truth table 0xCA with the selector first.
inline __m512i select_bits(__m512i sel, __m512i a, __m512i b) {
  return _mm512_ternarylogic_epi32(sel, a, b, 0xCA);
}

// kAhead: one prefetch per line consumed, this many bytes ahead, tied beside the loads
// (rows16_prefetch_beside).
template <int kAhead>
struct Q6_KAvx512 {
  // 8 tokens per pass over the weights (rows16_max_tokens): the kernel alone ran faster with
  // 8 than with 4 in a throwaway probe; the whole matmul moved within the host's noise
  // (docs/kernels.md, "Tokens per pass").
  static constexpr int kMaxTokens = 8;
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i six = _mm512_set1_epi8(0x3f);
  const __m512i low2 = _mm512_set1_epi8(0x03);

  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    __m512i s[NT];
    for (int t = 0; t < NT; ++t) s[t] = _mm512_setzero_si512();
    for (int grp = 0; grp < 16; ++grp) {
      const uint8_t* v = g + 288 + 192 * grp;
      __m512i v0 = _mm512_loadu_si512(v);
      rows16_prefetch_beside(v0, v + kAhead);
      // The super-block's header (d and scales, 4.5 lines) rides along the first groups.
      if (grp < 5) rows16_prefetch_beside(v0, g + kAhead + 64 * grp);
      __m512i v1 = _mm512_loadu_si512(v + 64);
      rows16_prefetch_beside(v1, v + 64 + kAhead);
      __m512i v2 = _mm512_loadu_si512(v + 128);
      rows16_prefetch_beside(v2, v + 128 + kAhead);
      rows16_store_beside<NT>(v0);
      rows16_store_beside<NT>(v1);
      rows16_store_beside<NT>(v2);
      // Sets 1-3 are the low 6 bits; set 4 gathers the top two bits of each vector (the
      // 16-bit shifts bring in a neighbour byte's bits above the ones kept).
      const __m512i q1 = _mm512_and_si512(v0, six);
      const __m512i q2 = _mm512_and_si512(v1, six);
      const __m512i q3 = _mm512_and_si512(v2, six);
      const __m512i q4 = _mm512_and_si512(
          select_bits(low4, select_bits(low2, _mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4)),
                      _mm512_srli_epi16(v2, 2)),
          six);
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
    const __m512 dw = Rows16Lanes::f16(g, 0);
    for (int t = 0; t < NT; ++t) {
      acc[t][0] = Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), s[t], acc[t][0]);
    }
  }
};

// Prefetch distances per CPU (stream_tuning.h): Zen 4 2 KiB (1.5 and 3 KiB within noise of
// it, 4 KiB slower), Zen 5 6 KiB.
template <int kAhead>
using Q6_KKernel = Rows16Blocks<Q6_KAvx512<kAhead>, Rows16Q6_K>;

}  // namespace

Rows16DotKernel* const rows16_q6_k_dot_avx512 =
    rows16_dot_tuned<Q6_KKernel<2048>, Q6_KKernel<6144>>;

}  // namespace hearth::quant
