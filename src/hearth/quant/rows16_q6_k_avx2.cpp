// Q6_K row-interleaved kernel for AVX2 without VNNI: one row per 32-bit lane, rows 0-7 and
// 8-15 in two 256-bit halves. Per 16-element group the three quant vectors give sets 1-3 by
// a mask and set 4 by three shifts, masks and ors (layout in rows16_kernels.h). Quants
// (0..63) times activation bytes through vpmaddubsw give 16-bit pair sums of at most
// 2 * 63 * 127; two sets add up in 16 bits (at most 32004) before vpmaddwd by ones widens
// them. Same integer sums and float steps per lane as the scalar reference (rows16_q6_k.cpp), so
// the same bits.

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (not measured on AVX2
// hardware).
constexpr int kPrefetchBytes = 2048;

struct Q6_KAvx2 {
  const __m256i six = _mm256_set1_epi8(0x3f);
  const __m256i bits01 = _mm256_set1_epi8(0x03);
  const __m256i bits23 = _mm256_set1_epi8(0x0c);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  const __m256i ones = _mm256_set1_epi16(1);

  // Halves H of the 16 rows (Rows16Halves).
  template <int NT, int H>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    constexpr int h0 = Rows16Halves<H>::kBegin, h1 = Rows16Halves<H>::kEnd;
    __m256i s[NT][2];
    for (int t = 0; t < NT; ++t) s[t][0] = s[t][1] = _mm256_setzero_si256();
    for (int grp = 0; grp < 16; ++grp) {
      const uint8_t* v = g + 288 + 192 * grp;
      for (int h = h0; h < h1; ++h) {  // rows 8h .. 8h + 7
        __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 32 * h));
        __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 64 + 32 * h));
        __m256i v2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + 128 + 32 * h));
        if (h == h0) {  // each pass prefetches the lines
          rows16_prefetch_beside(v0, v + kPrefetchBytes);
          rows16_prefetch_beside(v1, v + 64 + kPrefetchBytes);
          rows16_prefetch_beside(v2, v + 128 + kPrefetchBytes);
          // The super-block's header (d and scales, 4.5 lines) rides along the first groups.
          if (grp < 5) rows16_prefetch_beside(v0, g + kPrefetchBytes + 64 * grp);
        }
        const __m256i q1 = _mm256_and_si256(v0, six);
        const __m256i q2 = _mm256_and_si256(v1, six);
        const __m256i q3 = _mm256_and_si256(v2, six);
        // Set 4: bits 6-7 of v0, v1, v2 become bits 0-1, 2-3, 4-5 (16-bit shifts bring a
        // neighbour byte's bits in above the ones kept; the masks drop them).
        const __m256i q4 =
            _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v0, 6), bits01),
                                            _mm256_and_si256(_mm256_srli_epi16(v1, 4), bits23)),
                            _mm256_and_si256(_mm256_srli_epi16(v2, 2), bits45));
        const __m256i sc = _mm256_cvtepi8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + 32 + 16 * grp + 8 * h)));
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 80 + 16 * grp;
          const __m256i p12 = _mm256_add_epi16(
              _mm256_maddubs_epi16(q1, _mm256_set1_epi32(rows16_load_i32(aq))),
              _mm256_maddubs_epi16(q2, _mm256_set1_epi32(rows16_load_i32(aq + 4))));
          const __m256i p34 = _mm256_add_epi16(
              _mm256_maddubs_epi16(q3, _mm256_set1_epi32(rows16_load_i32(aq + 8))),
              _mm256_maddubs_epi16(q4, _mm256_set1_epi32(rows16_load_i32(aq + 12))));
          const __m256i x = _mm256_add_epi32(
              _mm256_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * grp)),
              _mm256_add_epi32(_mm256_madd_epi16(p12, ones), _mm256_madd_epi16(p34, ones)));
          s[t][h] = _mm256_add_epi32(s[t][h], _mm256_mullo_epi32(sc, x));
          // Not for one token: decode streamed more slowly with the chain kept.
          if constexpr (NT > 1) rows16_keep_chain(s[t][h]);
        }
      }
    }
    for (int h = h0; h < h1; ++h) {
      const __m256 dw = Rows16Lanes::f16(g, h);
      for (int t = 0; t < NT; ++t) {
        acc[t][h] = Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), s[t][h], acc[t][h]);
      }
    }
  }
};

// Elements 32m .. 32m + 31 of a GGUF Q6_K block b (its quarter m % 4 of half m / 4), one 6-bit
// quant per byte, and in each group's dwords 0-2 (its sets 0-2) the two bits of set 3 that
// the layout keeps in the top of that set's bytes (rows16_kernels.h): lane 0 holds group 2m,
// lane 1 group 2m + 1, as dwords 0-3 (sets 0-3; dword 3 is left as it is, not stored).
[[gnu::always_inline]] inline __m256i q6_k_sets(const BlockQ6_K& b, int m) {
  const int half = m / 4, c = m % 4;
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  const __m256i top2 = _mm256_set1_epi8(static_cast<char>(0xc0));
  const __m256i ql =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * half + 32 * (c & 1)));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half));
  // Low 4 bits: the low nibbles for quarters 0-1, the high ones for 2-3; bits 2c, 2c + 1 of
  // qh to bits 4-5 (masked: the 16-bit shifts move bits in from the neighbour byte).
  const __m256i lo = _mm256_and_si256(c < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
  const __m256i hi = c < 2 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4);
  const __m256i q = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
  // Set 3 in every dword, its bits 2k, 2k + 1 of each byte moved to bits 6, 7 for set k
  // (masked: the 32-bit shifts move bits into the neighbour byte's low bits).
  const __m256i set3 = _mm256_shuffle_epi32(q, 0xff);
  const __m256i top = _mm256_sllv_epi32(set3, _mm256_setr_epi32(6, 4, 2, 0, 6, 4, 2, 0));
  return _mm256_or_si256(q, _mm256_and_si256(top, top2));
}

// Rows16::repack, AVX2: per row, each quarter's quants as q6_k_sets builds them (two groups'
// four-byte sets in a vector), turned into the layout's vectors of each half of the rows by
// rows16_transpose8 (sets 0-2 of each group stored, set 3 dropped); the group scales through the
// byte transpose. The same bytes as the scalar pack_block (rows16_q6_k.cpp).
void repack_q6_k(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += Rows16Q6_K::kBlockBytes) {
    const BlockQ6_K* b[kRows16];
    rows16_column_blocks(src, src_row_bytes, i, g, b);
    __m128i scales[16];  // row r's 16 group scales
    for (int r = 0; r < kRows16; ++r) {
      scales[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]->scales));
    }
    __m128i by_group[16];  // group j's scale of the 16 rows, at 32 + 16j
    rows16_transpose_bytes(scales, by_group);
    for (int j = 0; j < 16; ++j) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 32 + 16 * j), by_group[j]);
    }
    for (int m = 0; m < 8; ++m) {
      for (int h = 0; h < Rows16Lanes::kHalves; ++h) {
        __m256i v[8], out[8];  // out[4e + k]: set k of group 2m + e
        for (int r = 0; r < 8; ++r) v[r] = q6_k_sets(*b[8 * h + r], m);
        rows16_transpose8(v, out);
        for (int e = 0; e < 2; ++e) {
          for (int k = 0; k < 3; ++k) {
            _mm256_storeu_si256(
                reinterpret_cast<__m256i*>(g + 288 + 192 * (2 * m + e) + 64 * k + 32 * h),
                out[4 * e + k]);
          }
        }
      }
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q6_k_repack_avx2 = repack_q6_k;
Rows16DotKernel* const rows16_q6_k_dot_avx2 = rows16_dot<Rows16Blocks<Q6_KAvx2, Rows16Q6_K>>;

}  // namespace hearth::quant
