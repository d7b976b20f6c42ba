// Q4_0 row-interleaved kernel for AVX2 without VNNI: one row per 32-bit lane, rows 0-7 and
// 8-15 in two 256-bit halves. Nibbles (0..15) times activation bytes through vpmaddubsw give
// 16-bit pair sums of at most 2 * 15 * 127; a block's 8 of them (4 slices, low and high
// nibbles) add up in 16 bits (at most 30480) before one vpmaddwd by ones widens them. Same
// integer sums and float steps (Q4_0's quads of block columns, kBlockQuads) per lane as the scalar
// reference (rows16_q4_0.cpp), so the same bits.

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the Q8_0 kernel (not measured on AVX2
// hardware).
constexpr int kPrefetchBytes = 4096;

struct Q4_0Avx2 {
  // block adds into the sums of the quad of block columns at hand (Rows16Blocks).
  static constexpr bool kBlockQuads = true;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);

  // Halves H of the 16 rows (Rows16Halves).
  template <int NT, int H>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& q) const {
    constexpr int h0 = Rows16Halves<H>::kBegin, h1 = Rows16Halves<H>::kEnd;
    __m256i lo[4][2], hi[4][2];  // (slice, half)
    for (int s = 0; s < 4; ++s) {
      for (int h = h0; h < h1; ++h) {
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 + 64 * s + 32 * h));
        // A block column is 288 bytes (4.5 lines): 5 prefetches cover it, in each pass.
        if (h == h0) rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * s);
        if (h == h0 && s == 3) rows16_prefetch_beside(v, g + kPrefetchBytes + 256);
        lo[s][h] = _mm256_and_si256(v, m4);
        hi[s][h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const uint8_t* aq = ab[t] + 8;
      const __m256i corr = _mm256_set1_epi32(rows16_load_i32(ab[t] + 4));
      __m256i p16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int s = 0; s < 4; ++s) {
        const __m256i a_lo = _mm256_set1_epi32(rows16_load_i32(aq + 4 * s));
        const __m256i a_hi = _mm256_set1_epi32(rows16_load_i32(aq + 16 + 4 * s));
        for (int h = h0; h < h1; ++h) {
          p16[h] = _mm256_add_epi16(p16[h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[s][h], a_lo),
                                                             _mm256_maddubs_epi16(hi[s][h], a_hi)));
          rows16_keep_chain(p16[h]);
        }
      }
      const float da = rows16_load_f32(ab[t]);
      for (int h = h0; h < h1; ++h) {
        const __m256i isum = _mm256_add_epi32(corr, _mm256_madd_epi16(p16[h], ones));
        q[t][h] = Rows16Lanes::fma_scaled(Rows16Lanes::f16(g, h), da, isum, q[t][h]);
      }
    }
  }
};

// Rows16::repack, AVX2: per block column, the 16 rows' d copied in order, and their quant
// bytes (four dwords a row, dword s to slice s) transposed in vectors per half h of the rows:
// vector q holds row 8h + q in its low 128 bits and 8h + 4 + q in its high ones, so that unpacks
// of 32- and 64-bit units across the four vectors leave slice s with the half's rows in lane
// order. The same bytes as the scalar repack.
void repack_q4_0(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQK0; ++i, g += Rows16Q4_0::kBlockBytes) {
    const BlockQ4_0* b[kRows16];
    rows16_column_blocks(src, src_row_bytes, i, g, b);
    const auto qs = [&](int r) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]->qs));
    };
    for (int h = 0; h < Rows16Lanes::kHalves; ++h) {
      __m256i z[4];  // half j of z[q]: row 8h + 4j + q
      for (int q = 0; q < 4; ++q) z[q] = _mm256_set_m128i(qs(8 * h + 4 + q), qs(8 * h + q));
      // Per half j: t01 = (row 4j dword 0, 4j + 1 dword 0, 4j dword 1, 4j + 1 dword 1) and so on.
      const __m256i t01_lo = _mm256_unpacklo_epi32(z[0], z[1]),
                    t01_hi = _mm256_unpackhi_epi32(z[0], z[1]);
      const __m256i t23_lo = _mm256_unpacklo_epi32(z[2], z[3]),
                    t23_hi = _mm256_unpackhi_epi32(z[2], z[3]);
      const __m256i slice[4] = {
          _mm256_unpacklo_epi64(t01_lo, t23_lo), _mm256_unpackhi_epi64(t01_lo, t23_lo),
          _mm256_unpacklo_epi64(t01_hi, t23_hi), _mm256_unpackhi_epi64(t01_hi, t23_hi)};
      for (int sl = 0; sl < 4; ++sl) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + 32 + 64 * sl + 32 * h), slice[sl]);
      }
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q4_0_repack_avx2 = repack_q4_0;
Rows16DotKernel* const rows16_q4_0_dot_avx2 = rows16_dot<Rows16Blocks<Q4_0Avx2, Rows16Q4_0>>;

}  // namespace hearth::quant
