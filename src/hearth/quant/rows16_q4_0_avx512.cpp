// Q4_0 row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. A 64-byte load holds 4
// GGUF quant bytes of each of 16 rows; its low nibbles (& 0x0F) are elements 4s..4s+3 and its
// high nibbles (& 0xF0, i.e. 16x the nibble) elements 16+4s..16+4s+3, each one vpdpbusd against
// the broadcast 4 activation quants into a chain of its own; the x16 is shifted out exactly
// at the end of the block. Same integer sums and float steps (Q4_0's quads of block columns,
// kBlockQuads) per lane as the scalar reference (rows16_q4_0.cpp), so the same bits.

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line consumed, this far ahead, tied beside the loads
// (rows16_prefetch_beside), as the Q8_0 kernel.
constexpr int kPrefetchBytes = 4096;

struct Q4_0Avx512 {
  // block and block_pair add into the sums of the quad of block columns at hand
  // (Rows16Blocks, Rows16PairBlocks).
  static constexpr bool kBlockQuads = true;
  // 8 tokens per pass over the weights (rows16_max_tokens): the kernel alone ran faster with
  // 8 than with 4 in a throwaway probe; the whole matmul moved within the host's noise
  // (docs/kernels.md, "Tokens per pass").
  static constexpr int kMaxTokens = 8;
  const __m512i m_lo = _mm512_set1_epi8(0x0f);
  const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));

  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& q) const {
    // A block column is 288 bytes (4.5 lines): 5 prefetches cover it.
    __m512i lo[4], hi[4];
    for (int s = 0; s < 4; ++s) {
      __m512i v = _mm512_loadu_si512(g + 32 + 64 * s);
      rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * s);
      if (s == 3) rows16_prefetch_beside(v, g + kPrefetchBytes + 256);
      rows16_store_beside<NT>(v);
      lo[s] = _mm512_and_si512(v, m_lo);
      hi[s] = _mm512_and_si512(v, m_hi);
    }
    const __m512 dw = Rows16Lanes::f16(g, 0);
    for (int t = 0; t < NT; ++t) {
      const uint8_t* aq = ab[t] + 8;
      __m512i s_lo = rows16_q8_0_corr(ab[t]);
      __m512i s_hi = _mm512_setzero_si512();
      for (int s = 0; s < 4; ++s) {
        s_lo = _mm512_dpbusd_epi32(s_lo, lo[s], _mm512_set1_epi32(rows16_load_i32(aq + 4 * s)));
        s_hi =
            _mm512_dpbusd_epi32(s_hi, hi[s], _mm512_set1_epi32(rows16_load_i32(aq + 16 + 4 * s)));
      }
      const __m512i isum = _mm512_add_epi32(s_lo, _mm512_srai_epi32(s_hi, 4));
      q[t][0] = Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), isum, q[t][0]);
    }
  }

  // Two groups, 4 tokens a pass. To fit one vpdpbusd chain per group and token in registers,
  // the high nibbles are shifted down instead of summed 16x in a chain of their own: the
  // same integer sum.
  static constexpr int kPairTokens = 4;
  template <int NT>
  [[gnu::always_inline]] void block_pair(const uint8_t* g0, const uint8_t* g1, Rows16Acts<NT> ab,
                                         Rows16Acc<NT>& q0, Rows16Acc<NT>& q1) const {
    __m512i s0[NT], s1[NT];  // one chain per group and token, from the correction
    for (int t = 0; t < NT; ++t) s0[t] = s1[t] = rows16_q8_0_corr(ab[t]);
    for (int s = 0; s < 4; ++s) {
      const __m512i v0 = _mm512_loadu_si512(g0 + 32 + 64 * s);
      const __m512i v1 = _mm512_loadu_si512(g1 + 32 + 64 * s);
      const __m512i lo0 = _mm512_and_si512(v0, m_lo);
      const __m512i lo1 = _mm512_and_si512(v1, m_lo);
      const __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m_lo);
      const __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m_lo);
      for (int t = 0; t < NT; ++t) {
        const __m512i a_lo = _mm512_set1_epi32(rows16_load_i32(ab[t] + 8 + 4 * s));
        const __m512i a_hi = _mm512_set1_epi32(rows16_load_i32(ab[t] + 24 + 4 * s));
        s0[t] = _mm512_dpbusd_epi32(s0[t], lo0, a_lo);
        s1[t] = _mm512_dpbusd_epi32(s1[t], lo1, a_lo);
        s0[t] = _mm512_dpbusd_epi32(s0[t], hi0, a_hi);
        s1[t] = _mm512_dpbusd_epi32(s1[t], hi1, a_hi);
      }
    }
    rows16_q8_0_pair_scale<NT>(g0, g1, ab, s0, s1, q0, q1);
  }
};

// Rows16::repack, AVX-512: per block column, the 16 rows' d copied in order, and their quant
// bytes (four dwords a row, dword s to slice s) transposed in vectors: vector q gathers rows q,
// q + 4, q + 8, q + 12 in its 128-bit chunks, so that unpacks of 32- and 64-bit units across the
// four vectors leave slice s with the rows in lane order. The same bytes as the scalar repack.
void repack_q4_0(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQK0; ++i, g += Rows16Q4_0::kBlockBytes) {
    const BlockQ4_0* b[kRows16];
    rows16_column_blocks(src, src_row_bytes, i, g, b);
    const auto qs = [&](int r) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]->qs));
    };
    __m512i z[4];  // chunk j of z[q]: row q + 4j
    for (int q = 0; q < 4; ++q) {
      z[q] = _mm512_inserti32x4(_mm512_castsi128_si512(qs(q)), qs(q + 4), 1);
      z[q] = _mm512_inserti32x4(z[q], qs(q + 8), 2);
      z[q] = _mm512_inserti32x4(z[q], qs(q + 12), 3);
    }
    // Per chunk j: t01 = (row 4j dword 0, 4j+1 dword 0, 4j dword 1, 4j+1 dword 1) and so on.
    const __m512i t01_lo = _mm512_unpacklo_epi32(z[0], z[1]),
                  t01_hi = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t23_lo = _mm512_unpacklo_epi32(z[2], z[3]),
                  t23_hi = _mm512_unpackhi_epi32(z[2], z[3]);
    const __m512i slice[4] = {
        _mm512_unpacklo_epi64(t01_lo, t23_lo), _mm512_unpackhi_epi64(t01_lo, t23_lo),
        _mm512_unpacklo_epi64(t01_hi, t23_hi), _mm512_unpackhi_epi64(t01_hi, t23_hi)};
    for (int sl = 0; sl < 4; ++sl) _mm512_storeu_si512(g + 32 + 64 * sl, slice[sl]);
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q4_0_repack_avx512 = repack_q4_0;
Rows16DotKernel* const rows16_q4_0_dot_avx512 = rows16_dot<Rows16Blocks<Q4_0Avx512, Rows16Q4_0>>;
Rows16PairKernel* const rows16_q4_0_dot_pair_avx512 =
    rows16_dot_pair<Rows16PairBlocks<Q4_0Avx512, Rows16Q4_0>>;

}  // namespace hearth::quant
