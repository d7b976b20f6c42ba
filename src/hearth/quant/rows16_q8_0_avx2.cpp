// Q8_0 row-interleaved kernel for AVX2 without VNNI: one row per 32-bit lane, rows 0-7 and
// 8-15 in two 256-bit halves. vpmaddubsw needs one unsigned operand, so each 4-byte group
// takes |w| (unsigned, up to 128) and a with w's sign: pair sums stay below 2^15
// (2 * 128 * 127), then vpmaddwd by ones widens to 32 bits. The integer sums are exact and
// the float steps per lane are the scalar reference (rows16_q8_0.cpp)'s, so the bits are the same.
// Slices outer, tokens inner: each weight vector is decoded once and meets every token while
// in a register (decoding a block column's 16 first would hold 32 vectors in AVX2's 16
// registers).
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (measured here with
// HEARTH_ISA=avx2; no AVX2-only hardware to measure on).
constexpr int kPrefetchBytes = 4096;

struct Q8_0Avx2 {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);

  // Halves H of the 16 rows (Rows16Halves).
  template <int NT, int H>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    constexpr int h0 = Rows16Halves<H>::kBegin, h1 = Rows16Halves<H>::kEnd;
    __m256i isum[NT][2];
    for (int t = 0; t < NT; ++t) isum[t][0] = isum[t][1] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      __m256i a4[NT];
      for (int t = 0; t < NT; ++t) a4[t] = _mm256_set1_epi32(rows16_load_i32(ab[t] + 8 + 4 * s));
      for (int h = h0; h < h1; ++h) {
        __m256i raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 32 + 64 * s + 32 * h));
        // A block column is 544 bytes (8.5 lines): 9 prefetches cover it, in each pass.
        if (h == h0) rows16_prefetch_beside(raw, g + kPrefetchBytes + 64 * s);
        if (h == h0 && s == 7) rows16_prefetch_beside(raw, g + kPrefetchBytes + 512);
        const __m256i w = _mm256_xor_si256(raw, flip);
        const __m256i wabs = _mm256_abs_epi8(w);
        for (int t = 0; t < NT; ++t) {
          const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a4[t], w));
          isum[t][h] = _mm256_add_epi32(isum[t][h], _mm256_madd_epi16(p16, ones));
          rows16_keep_chain(isum[t][h]);
        }
      }
    }
    for (int h = h0; h < h1; ++h) {
      const __m256 dw = Rows16Lanes::f16(g, h);
      for (int t = 0; t < NT; ++t) {
        acc[t][h] = Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), isum[t][h], acc[t][h]);
      }
    }
  }
};

// Rows16::repack, AVX2: per block column and half of the rows, each row's 32 quants (8 dwords)
// in a vector, turned into the column's 8 slices by rows16_transpose8 and flipped to unsigned
// on the way out; the scales go as the scalar pack writes them. The same bytes as the scalar
// repack.
void repack_q8_0(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < cols / kQK0; ++i, g += Rows16Q8_0::kBlockBytes) {
    for (int h = 0; h < Rows16Lanes::kHalves; ++h) {
      __m256i v[8], out[8];
      for (int r = 0; r < 8; ++r) {
        const BlockQ8_0& b = rows16_row<BlockQ8_0>(src, 8 * h + r, src_row_bytes)[i];
        std::memcpy(g + 2 * (8 * h + r), &b.d, 2);
        v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
      }
      rows16_transpose8(v, out);
      for (int s = 0; s < 8; ++s) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + 32 + 64 * s + 32 * h),
                            _mm256_xor_si256(out[s], flip));
      }
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q8_0_repack_avx2 = repack_q8_0;
Rows16DotKernel* const rows16_q8_0_dot_avx2 = rows16_dot<Rows16Blocks<Q8_0Avx2, Rows16Q8_0>>;

}  // namespace hearth::quant
