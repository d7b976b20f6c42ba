// Q4_K and Q5_K row-interleaved kernels for AVX2 without VNNI: one row per 32-bit lane, rows
// 0-7 and 8-15 in two 256-bit halves. Quants times activation bytes through vpmaddubsw give
// 16-bit pair sums; slices add up in 16 bits before one vpmaddwd by the sub-block's scale (in
// both halves of each row's lane) widens and scales them at once: all 8 of a sub-block for
// Q4_K (nibbles 0..15: at most 8 * 2 * 15 * 128 = 30720), 4 at a time for Q5_K (0..31:
// 4 * 2 * 31 * 128 = 31744). So per 4 quants a sub-block costs a mask (and a shift for the
// high nibbles), a vpmaddubsw and a 16-bit add; Q5_K's five-bit bytes (rows16_kernels.h) cost
// a mask for sub-block 2p, and for 2p + 1 a shift and a mask of the byte's top three bits and
// a shift, a mask and an or of its two bits from the quad's high-bit vector (at bits 2(s % 4)
// and 2(s % 4) + 1). Same integer sums and float steps per lane as the scalar reference
// (rows16_common.h, rows16_q4_k_block_dot), so the same bits.
#include <cstring>

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line, tied beside the loads, as the AVX-512 kernel (measured here with
// HEARTH_ISA=avx2; no AVX2-only hardware to measure on).
constexpr int kPrefetchBytes = 4096;

// Bits j and j + 1 of every byte of h moved to bits 3 and 4, the rest cleared. Left or right
// 16-bit shifts bring a neighbour byte's bits only into places the mask drops.
[[gnu::always_inline]] inline __m256i bits_to_3(__m256i h, int j, __m256i bits34) {
  const __m256i moved = j <= 3 ? _mm256_slli_epi16(h, 3 - j) : _mm256_srli_epi16(h, j - 3);
  return _mm256_and_si256(moved, bits34);
}

// kQuants, kHighBits: where the low 4 bits and Q5_K's high-bit slices start in a block
// column (rows16_kernels.h); kHighBits < 0 for Q4_K.
template <int kQuants, int kHighBits>
struct Q4_KAvx2 {
  static constexpr bool kFive = kHighBits >= 0;
  static constexpr int kSlicesPer16Bits = kFive ? 4 : 8;
  // Three tokens a pass: each keeps its two 16-bit pair sums, its scaled sum and its float
  // sum live through a half's quant loops, and AVX2 has 16 registers; for Q4_K two and four
  // were slower (docs/kernels.md, "AVX2: one half of the rows a pass").
  static constexpr int kMaxTokens = 3;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m5 = _mm256_set1_epi8(0x1f);
  const __m256i m3 = _mm256_set1_epi8(0x07);
  const __m256i bits34 = _mm256_set1_epi8(0x18);

  // The 8 rows' u8 scales at p, each in both 16-bit halves of its 32-bit lane.
  [[gnu::always_inline]] static __m256i scale_pairs(const uint8_t* p) {
    const __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return _mm256_or_si256(sc, _mm256_slli_epi32(sc, 16));
  }

  // Halves H of the 16 rows (Rows16Halves).
  template <int NT, int H>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    constexpr int h0 = Rows16Halves<H>::kBegin, h1 = Rows16Halves<H>::kEnd;
    __m256i s1[NT][2];
    for (int t = 0; t < NT; ++t) s1[t][0] = s1[t][1] = _mm256_setzero_si256();
      // Unrolled: GCC 12 otherwise keeps Q5_K's loops rolled, with the sums copied between
      // registers every turn.
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const uint8_t* qp = g + kQuants + 512 * p;
#pragma GCC unroll 2
      for (int h = h0; h < h1; ++h) {  // rows 8h .. 8h + 7
        // Each row's scales of sub-blocks 2p and 2p + 1 in both 16-bit halves of its lane:
        // vpmaddwd by them widens a 16-bit pair sum and scales it in one step.
        const __m256i sc_lo = scale_pairs(g + 64 + 32 * p + 8 * h);
        const __m256i sc_hi = scale_pairs(g + 64 + 32 * p + 16 + 8 * h);
        __m256i lo16[NT], hi16[NT];  // 16-bit pair sums of sub-blocks 2p, 2p + 1 since widening
        for (int t = 0; t < NT; ++t) lo16[t] = hi16[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qp + 64 * s + 32 * h));
          // The block column's lines in order, one or two per quant load of the first half,
          // header and Q5_K's high bits included, as on AVX-512 (prefetch_ahead there), in
          // each pass.
          if (h == h0) {
            constexpr int kLines = (kQuants + 2048) / 64;
            const int u = 8 * p + s;
            for (int l = kLines * u / 32; l < kLines * (u + 1) / 32; ++l)
              rows16_prefetch_beside(v, g + kPrefetchBytes + 64 * l);
          }
          __m256i lo, hi;
          if constexpr (kFive) {
            const __m256i hb = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(g + kHighBits + 128 * p + 64 * (s / 4) + 32 * h));
            lo = _mm256_and_si256(v, m5);
            hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 5), m3),
                                 bits_to_3(hb, 2 * (s % 4), bits34));
          } else {
            lo = _mm256_and_si256(v, m4);
            hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          }
          for (int t = 0; t < NT; ++t) {
            const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
            lo16[t] = _mm256_add_epi16(
                lo16[t], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(rows16_load_i32(aq))));
            hi16[t] = _mm256_add_epi16(
                hi16[t], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(rows16_load_i32(aq + 32))));
            rows16_keep_chain(lo16[t]);
            rows16_keep_chain(hi16[t]);
          }
          if ((s + 1) % kSlicesPer16Bits == 0) {
            for (int t = 0; t < NT; ++t) {
              s1[t][h] =
                  _mm256_add_epi32(s1[t][h], _mm256_add_epi32(_mm256_madd_epi16(lo16[t], sc_lo),
                                                              _mm256_madd_epi16(hi16[t], sc_hi)));
              rows16_keep_chain(s1[t][h]);
              lo16[t] = hi16[t] = _mm256_setzero_si256();
            }
          }
        }
      }
    }
    // The mins after the quants, so that their sums are not live through the quant loops.
    __m256i s2[NT][2];
    for (int t = 0; t < NT; ++t) s2[t][0] = s2[t][1] = _mm256_setzero_si256();
    for (int p = 0; p < 4; ++p) {
      for (int h = h0; h < h1; ++h) {
        const __m256i m16 = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 192 + 32 * p + 16 * h)));
        for (int t = 0; t < NT; ++t) {
          s2[t][h] = _mm256_add_epi32(
              s2[t][h],
              _mm256_madd_epi16(m16, _mm256_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * p))));
        }
      }
    }
    // Per row: d * d_a * (scaled quant sums) - dmin * d_a * (scaled min sums).
    for (int h = h0; h < h1; ++h) {
      const __m256 dw = Rows16Lanes::f16(g, h);
      const __m256 dm = Rows16Lanes::f16(g + 32, h);
      for (int t = 0; t < NT; ++t) {
        const float da = rows16_load_f32(ab[t]);
        acc[t][h] = Rows16Lanes::fma_scaled(dw, da, s1[t][h], acc[t][h]);
        acc[t][h] = Rows16Lanes::fnma_scaled(dm, da, s2[t][h], acc[t][h]);
      }
    }
  }
};

// The scales and mins part of rows16_pack_q4_k_header for the 16 rows of a block column
// (head[r]: row r's first 16 GGUF bytes, d, dmin and the 12 packed scale bytes p[0..11] at
// 4..15), in vectors: per row the 8 scales and 8 mins as bytes (unpack_q4k_scales with byte
// shuffles, two rows a vector), then a byte transpose puts each scale's 16 rows together.
inline void pack_q4_k_scales(const __m128i (&head)[16], uint8_t* g) {
  constexpr char Z = -128;  // pshufb: a zero byte
  // Output bytes: sc0..3 = p0..3 & 63, sc4..7 = (p8..11 & 15) | (p0..3 >> 6) << 4,
  // m0..3 = p4..7 & 63, m4..7 = (p8..11 >> 4) | (p4..7 >> 6) << 4.
  const __m256i low = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, Z, Z, Z, Z));
  const __m256i low_mask = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
  const __m256i nib = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 12, 13, 14, 15));
  const __m256i top =
      _mm256_broadcastsi128_si256(_mm_setr_epi8(Z, Z, Z, Z, 4, 5, 6, 7, Z, Z, Z, Z, 8, 9, 10, 11));
  const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
  __m128i x[16];
  for (int r = 0; r < kRows16; r += 2) {
    const __m256i h = _mm256_set_m128i(head[r + 1], head[r]);
    const __m256i p1 = _mm256_and_si256(_mm256_shuffle_epi8(h, low), low_mask);
    const __m256i p2 = _mm256_shuffle_epi8(_mm256_and_si256(_mm256_srli_epi16(h, 4), m4), nib);
    // A 16-bit shift by 2 brings bits 6-7 of each byte to 4-5; the mask drops the rest.
    const __m256i p3 = _mm256_and_si256(_mm256_srli_epi16(_mm256_shuffle_epi8(h, top), 2), m30);
    const __m256i u = _mm256_or_si256(_mm256_or_si256(p1, p2), p3);
    x[r] = _mm256_castsi256_si128(u);
    x[r + 1] = _mm256_extracti128_si256(u, 1);
  }
  rows16_store_q4_k_scales(x, g);
}

// Q5_K's high-bit slices of the 16 rows (qh[r]: row r's 32 qh bytes), the bytes
// rows16_pack_q5_k_high_bits writes, in vectors. Output byte (p, c, i) of a row gathers bits 2p,
// 2p + 1 of its qh bytes 16c + 4s + i (s = 0..3) into bits 2s, 2s + 1: a byte shuffle puts those
// four bytes in one dword, two delta swaps transpose the dword's 4 x 4 two-bit fields, a second
// shuffle orders the row's dwords as (c, p), and rows16_transpose8 turns each half's rows into
// lanes.
template <int kHighBits>
inline void pack_q5_k_high_bits(const uint8_t* const (&qh)[16], uint8_t* g) {
  const __m256i t4 = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m256i m6 = _mm256_set1_epi32(0x00CC00CC), m12 = _mm256_set1_epi32(0x0000F0F0);
  for (int h = 0; h < Rows16Lanes::kHalves; ++h) {
    __m256i v[8];
    for (int r = 0; r < 8; ++r) {
      __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh[8 * h + r]));
      w = _mm256_shuffle_epi8(w, t4);  // dword 4c + i: qh bytes 16c + 4s + i as bytes s
      // Field (s, p) at bit 8s + 2p to (p, s): swap within 2 x 2 blocks, then the blocks.
      __m256i t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(w, 6), w), m6);
      w = _mm256_xor_si256(w, _mm256_xor_si256(t, _mm256_slli_epi32(t, 6)));
      t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(w, 12), w), m12);
      w = _mm256_xor_si256(w, _mm256_xor_si256(t, _mm256_slli_epi32(t, 12)));
      v[r] = _mm256_shuffle_epi8(w, t4);  // dword 4c + p: the row's output word (p, c)
    }
    __m256i out[8];
    rows16_transpose8(v, out);
    for (int c = 0; c < 2; ++c) {
      for (int p = 0; p < 4; ++p) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + kHighBits + 128 * p + 64 * c + 32 * h),
                            out[4 * c + p]);
      }
    }
  }
}

// rows16_mix_q5_k for slice quant vector q and its quad's high-bit vector h, k = 2(s % 4):
// the returned quant vector keeps bits 0-3, takes bit k of h into bit 4 and its own bits 4-6
// into 5-7, and h's bit k takes q's bit 7. The 16-bit shifts move bits across bytes only into
// places the masks drop.
[[gnu::always_inline]] inline __m256i mix_q5_k(__m256i q, __m256i& h, int k) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
  const __m256i top3 = _mm256_set1_epi8(static_cast<char>(0xe0));
  const __m256i at_k = _mm256_set1_epi8(static_cast<char>(1 << k));
  const __m256i f4 = k <= 4 ? _mm256_slli_epi16(h, 4 - k) : _mm256_srli_epi16(h, k - 4);
  const __m256i lo5 = _mm256_or_si256(_mm256_and_si256(q, low4), _mm256_and_si256(f4, bit4));
  h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 7 - k), at_k),
                      _mm256_andnot_si256(at_k, h));
  return _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(q, 1), top3), lo5);
}

// Pair p's quants of rows 8h .. 8h + 7 (b[r]: row r's block), the row's GGUF bytes qs[32p ..
// 32p + 31] turned into the pair's 8 slices by rows16_transpose8; for Q5_K (kHighBits >= 0)
// mixed with the high bits that pack_q5_k_high_bits stored before storing them, so that the
// quants are stored once.
template <typename B, int kQuants, int kHighBits>
[[gnu::always_inline]] inline void pack_q4_k_pair(const B* const (&b)[16], int p, int h,
                                                  uint8_t* g) {
  __m256i v[8], out[8];
  for (int r = 0; r < 8; ++r)
    v[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[8 * h + r]->qs + 32 * p));
  rows16_transpose8(v, out);
  if constexpr (kHighBits >= 0) {
    for (int c = 0; c < 2; ++c) {
      auto* hp = reinterpret_cast<__m256i*>(g + kHighBits + 128 * p + 64 * c + 32 * h);
      __m256i hv = _mm256_loadu_si256(hp);
      for (int j = 0; j < 4; ++j) out[4 * c + j] = mix_q5_k(out[4 * c + j], hv, 2 * j);
      _mm256_storeu_si256(hp, hv);
    }
  }
  for (int s = 0; s < 8; ++s) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(g + kQuants + 512 * p + 64 * s + 32 * h),
                        out[s]);
  }
}

// Rows16::repack, AVX2, for Q4_K (kHighBits < 0) and Q5_K: each row's d and dmin as the scalar
// pack writes them, the scales and mins (and Q5_K's high bits) of the 16 rows in vectors
// (pack_q4_k_scales, pack_q5_k_high_bits), and the quants per pair and half of the rows
// (pack_q4_k_pair). The same bytes as the scalar repack.
template <typename L, typename B, int kQuants, int kHighBits>
void repack_q4_k(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += L::kBlockBytes) {
    const B* b[kRows16];
    __m128i head[16];
    const uint8_t* qh[16];  // Q5_K
    for (int r = 0; r < kRows16; ++r) {
      b[r] = rows16_row<B>(src, r, src_row_bytes) + i;
      std::memcpy(g + 2 * r, &b[r]->d, 2);
      std::memcpy(g + 32 + 2 * r, &b[r]->dmin, 2);
      head[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[r]));
      if constexpr (kHighBits >= 0) qh[r] = b[r]->qh;
    }
    pack_q4_k_scales(head, g);
    if constexpr (kHighBits >= 0) pack_q5_k_high_bits<kHighBits>(qh, g);
    for (int p = 0; p < 4; ++p) {
      for (int h = 0; h < Rows16Lanes::kHalves; ++h)
        pack_q4_k_pair<B, kQuants, kHighBits>(b, p, h, g);
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q4_k_repack_avx2 =
    repack_q4_k<Rows16Q4_K, BlockQ4_K, kRows16Q4_KQuants, -1>;
Rows16RepackKernel* const rows16_q5_k_repack_avx2 =
    repack_q4_k<Rows16Q5_K, BlockQ5_K, kRows16Q5_KQuants, kRows16Q5_KHighBits>;
Rows16DotKernel* const rows16_q4_k_dot_avx2 =
    rows16_dot<Rows16Blocks<Q4_KAvx2<kRows16Q4_KQuants, -1>, Rows16Q4_K>>;
Rows16DotKernel* const rows16_q5_k_dot_avx2 =
    rows16_dot<Rows16Blocks<Q4_KAvx2<kRows16Q5_KQuants, kRows16Q5_KHighBits>, Rows16Q5_K>>;

}  // namespace hearth::quant
