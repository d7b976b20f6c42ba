// Q4_K and Q5_K row-interleaved kernels, AVX-512 VNNI: one row per 32-bit lane. A 64-byte load
// holds 4 GGUF quant bytes of each of 16 rows; its low nibbles belong to sub-block 2p and its
// high nibbles to sub-block 2p + 1, each one vpdpbusd against the broadcast 4 activation quants.
// Q4_K takes the high nibbles as they sit (& 0xF0, i.e. 16x the nibble) and shifts the x16 out
// of the sum exactly afterwards. Q5_K's bytes hold sub-block 2p's quants whole and three bits
// of 2p + 1's, whose other two come from its slice quad's high-bit vector, loaded once per four
// slices (rows16_kernels.h).
// Scales (u8) and mins (u8 pairs, vpmaddwd against the activation's sub-block
// sums) apply lane-wise. Same integer sums and float steps per lane as the scalar reference
// (rows16_common.h, rows16_q4_k_block_dot), so the same bits.
#include <cstring>
#include <initializer_list>

#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// kQuants, kHighBits: where the low 4 bits and Q5_K's high-bit slices start in a block
// column (rows16_kernels.h); kHighBits < 0 for Q4_K. kAhead: one prefetch into L1 per line
// consumed, this many bytes ahead (rows16_prefetch_beside), 0 for none; kL2Ahead: likewise a
// second one into L2 (rows16_prefetch_l2_beside) for one token, 0 for none.
template <int kQuants, int kHighBits, int kAhead, int kL2Ahead>
struct Q4_KAvx512 {
  static constexpr bool kFive = kHighBits >= 0;
  // Q5_K takes 8 tokens per pass over the weights (rows16_max_tokens), which shares its
  // heavier decode among more vpdpbusd; Q4_K, whose decode is two ands per load, gained
  // nothing from 8 (docs/kernels.md, "Tokens per pass").
  static constexpr int kMaxTokens = kFive ? 8 : 4;
  const __m512i m_lo = _mm512_set1_epi8(0x0f);
  const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));

  // The prefetches tied to load s of sub-block p (block column at g), into L2 if kL2 else L1,
  // kBytes ahead: the block column's lines in order, spread evenly over its 32 quant loads
  // (one or two each), so that the header and Q5_K's high bits ahead are fetched along the way.
  // Fetching those lead lines in a burst with the first pair's loads, as this did before, held
  // rows16 Q5_K's matvec well below the read bandwidth on an AMD EPYC Zen 5, however far ahead
  // (docs/kernels.md, "Lead lines spread over the loads").
  template <bool kL2, int kBytes>
  [[gnu::always_inline]] static void prefetch_ahead(__m512i& v, const uint8_t* g, int p, int s) {
    constexpr int kLines = (kQuants + 2048) / 64;
    const int u = 8 * p + s;
    for (int l = kLines * u / 32; l < kLines * (u + 1) / 32; ++l) {
      if constexpr (kL2) {
        rows16_prefetch_l2_beside(v, g + kBytes + 64 * l);
      } else {
        rows16_prefetch_beside(v, g + kBytes + 64 * l);
      }
    }
  }

  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    __m512i s1[NT];
    for (int t = 0; t < NT; ++t) s1[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    // Unrolled: GCC 12 otherwise keeps Q5_K's loops rolled, with the sums copied between
    // registers every turn.
    for (int p = 0; p < 4; ++p) {
      __m512i lo_sum[NT], hi_sum[NT];  // sub-block 2p, and (16x for Q4_K) sub-block 2p + 1
      for (int t = 0; t < NT; ++t) lo_sum[t] = hi_sum[t] = _mm512_setzero_si512();
      const uint8_t* qp = g + kQuants + 512 * p;
      __m512i h = _mm512_setzero_si512();  // Q5_K: the high bits of slices 4(s/4) .. +3
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i v = _mm512_loadu_si512(qp + 64 * s);
        if constexpr (kAhead > 0) prefetch_ahead<false, kAhead>(v, g, p, s);
        // Decode only: with more tokens the kernel is bound by arithmetic, where the extra
        // prefetches slowed it.
        if constexpr (kL2Ahead > 0 && NT == 1) prefetch_ahead<true, kL2Ahead>(v, g, p, s);
        // Q5_K's stores beside the loads made it stream more slowly on Zen 4 and did not
        // help on Zen 5 (docs/kernels.md, Q5_K in "Two layouts").
        if constexpr (!kFive) rows16_store_beside<NT>(v);
        if (kFive && s % 4 == 0) {
          h = _mm512_loadu_si512(g + kHighBits + 128 * p + 16 * s);
          asm("" : "+v"(h));  // one load: GCC would fold it into each of the quad's shifts
        }
        __m512i lo, hi;
        decode_pair(v, h, s, lo, hi);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
          lo_sum[t] = _mm512_dpbusd_epi32(lo_sum[t], lo, _mm512_set1_epi32(rows16_load_i32(aq)));
          hi_sum[t] =
              _mm512_dpbusd_epi32(hi_sum[t], hi, _mm512_set1_epi32(rows16_load_i32(aq + 32)));
        }
      }
      scale_sub_blocks<NT>(g, p, lo_sum, hi_sum, s1);
    }
    finish<NT>(g, ab, s1, acc);
  }

  // s1 += the sums of sub-blocks 2p (lo) and 2p + 1 (hi; 16x for Q4_K) of block column g,
  // each times its per-row scale.
  template <int NT>
  [[gnu::always_inline]] static void scale_sub_blocks(const uint8_t* g, int p,
                                                      const __m512i (&lo)[NT],
                                                      const __m512i (&hi)[NT], __m512i (&s1)[NT]) {
    const __m512i sc_lo =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p)));
    const __m512i sc_hi = _mm512_cvtepu8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 64 + 32 * p + 16)));
    for (int t = 0; t < NT; ++t) {
      const __m512i hi1 = kFive ? hi[t] : _mm512_srai_epi32(hi[t], 4);
      s1[t] = _mm512_add_epi32(s1[t], _mm512_add_epi32(_mm512_mullo_epi32(sc_lo, lo[t]),
                                                       _mm512_mullo_epi32(sc_hi, hi1)));
    }
  }

  // Adds block column g's scaled quant sums s1, less its mins times the activation's
  // sub-block sums, into acc.
  template <int NT>
  [[gnu::always_inline]] static void finish(const uint8_t* g, Rows16Acts<NT> ab,
                                            const __m512i (&s1)[NT], Rows16Acc<NT>& acc) {
    __m512i s2[NT]{};
    for (int p = 0; p < 4; ++p) {
      const __m512i m16 = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + 192 + 32 * p)));
      for (int t = 0; t < NT; ++t) {
        s2[t] = _mm512_add_epi32(
            s2[t], _mm512_madd_epi16(m16, _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * p))));
      }
    }
    // Per row: d * d_a * (scaled quant sums) - dmin * d_a * (scaled min sums).
    const __m512 dw = Rows16Lanes::f16(g, 0);
    const __m512 dm = Rows16Lanes::f16(g + 32, 0);
    for (int t = 0; t < NT; ++t) {
      const float da = rows16_load_f32(ab[t]);
      acc[t][0] = Rows16Lanes::fma_scaled(dw, da, s1[t], acc[t][0]);
      acc[t][0] = Rows16Lanes::fnma_scaled(dm, da, s2[t], acc[t][0]);
    }
  }

  // Two groups, 3 tokens a pass for Q4_K and 4 for Q5_K: a vpdpbusd chain per group, token and
  // sub-block of the pair p (12 or 16), so each activation broadcast feeds both groups; Q5_K's
  // heavier decode, shared by more vpdpbusd, made 4 pay where Q4_K's did not need it. Each
  // group's sums and float steps are block's (scale_sub_blocks, finish), so its bits are dot's.
  static constexpr int kPairTokens = kFive ? 4 : 3;
  // Sub-blocks 2p and 2p + 1 of slice s's 64-byte load v as vpdpbusd takes them. Q4_K: the low
  // nibbles, and the high ones as they sit (16x). Q5_K: rows16_q5_k_decode_pair (h: the slice
  // quad's high bits).
  [[gnu::always_inline]] void decode_pair(__m512i v, __m512i h, int s, __m512i& lo,
                                          __m512i& hi) const {
    if constexpr (kFive) {
      rows16_q5_k_decode_pair(v, h, s, lo, hi);
    } else {
      lo = _mm512_and_si512(v, m_lo);
      hi = _mm512_and_si512(v, m_hi);
    }
  }

  template <int NT>
  [[gnu::always_inline]] void block_pair(const uint8_t* g0, const uint8_t* g1, Rows16Acts<NT> ab,
                                         Rows16Acc<NT>& acc0, Rows16Acc<NT>& acc1) const {
    __m512i s1a[NT]{}, s1b[NT]{};
    for (int p = 0; p < 4; ++p) {
      __m512i lo_a[NT]{}, hi_a[NT]{}, lo_b[NT]{}, hi_b[NT]{};
      const uint8_t* qa = g0 + kQuants + 512 * p;
      const uint8_t* qb = g1 + kQuants + 512 * p;
      __m512i ha4 = _mm512_setzero_si512(), hb4 = ha4;  // Q5_K: the quad's high bits
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i va = _mm512_loadu_si512(qa + 64 * s);
        __m512i vb = _mm512_loadu_si512(qb + 64 * s);
        // One load each: GCC would otherwise fold the load into both ands, and loads are
        // what bounds this loop.
        asm("" : "+v"(va), "+v"(vb));
        if (kFive && s % 4 == 0) {
          ha4 = _mm512_loadu_si512(g0 + kHighBits + 128 * p + 16 * s);
          hb4 = _mm512_loadu_si512(g1 + kHighBits + 128 * p + 16 * s);
          asm("" : "+v"(ha4), "+v"(hb4));  // one load each, as va and vb
        }
        __m512i la, ha, lb, hb;
        decode_pair(va, ha4, s, la, ha);
        decode_pair(vb, hb4, s, lb, hb);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* aq = ab[t] + 32 + 64 * p + 4 * s;
          const __m512i xl = _mm512_set1_epi32(rows16_load_i32(aq));
          const __m512i xh = _mm512_set1_epi32(rows16_load_i32(aq + 32));
          lo_a[t] = _mm512_dpbusd_epi32(lo_a[t], la, xl);
          lo_b[t] = _mm512_dpbusd_epi32(lo_b[t], lb, xl);
          hi_a[t] = _mm512_dpbusd_epi32(hi_a[t], ha, xh);
          hi_b[t] = _mm512_dpbusd_epi32(hi_b[t], hb, xh);
        }
      }
      scale_sub_blocks<NT>(g0, p, lo_a, hi_a, s1a);
      scale_sub_blocks<NT>(g1, p, lo_b, hi_b, s1b);
    }
    finish<NT>(g0, ab, s1a, acc0);
    finish<NT>(g1, ab, s1b, acc1);
  }
};

// Prefetch distances per CPU (stream_tuning.h). Zen 4: 3 KiB for both; Q4_K streamed better
// there than at 4 and 6 KiB at 2 threads. Q5_K took none there while its lead lines were
// fetched in a burst; with them spread, the Zen 4 table streamed it far better than none on a
// Zen 5 (docs/kernels.md, "Lead lines spread over the loads"; no Zen 4 here to measure). Zen 5:
// Q4_K 4 KiB with a second prefetch into L2 8 KiB ahead, Q5_K 6 KiB and 12 KiB.
template <int kAhead, int kL2Ahead>
using Q4_KKernel = Rows16Blocks<Q4_KAvx512<kRows16Q4_KQuants, -1, kAhead, kL2Ahead>, Rows16Q4_K>;
template <int kAhead, int kL2Ahead>
using Q5_KKernel =
    Rows16Blocks<Q4_KAvx512<kRows16Q5_KQuants, kRows16Q5_KHighBits, kAhead, kL2Ahead>, Rows16Q5_K>;

// The scales and mins part of rows16_pack_q4_k_header for the 16 rows of a block column
// (head[r]: row r's first 16 GGUF bytes, d, dmin and the 12 packed scale bytes p[0..11] at
// 4..15), in vectors: per row the 8 scales and 8 mins as bytes (unpack_q4k_scales with byte
// shuffles, four rows a vector), then a byte transpose puts each scale's 16 rows together.
inline void pack_q4_k_scales(const __m128i (&head)[16], uint8_t* g) {
  constexpr auto lane = [](std::initializer_list<int> idx) {
    alignas(16) int8_t b[16];
    int k = 0;
    for (int i : idx) b[k++] = static_cast<int8_t>(i);
    return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
  };
  constexpr int Z = -128;  // pshufb: a zero byte
  // Output bytes: sc0..3 = p0..3 & 63, sc4..7 = (p8..11 & 15) | (p0..3 >> 6) << 4,
  // m0..3 = p4..7 & 63, m4..7 = (p8..11 >> 4) | (p4..7 >> 6) << 4.
  const __m512i low = lane({4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, Z, Z, Z, Z});
  const __m512i low_mask = lane({63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0});
  const __m512i nib = lane({Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, Z, 12, 13, 14, 15});
  const __m512i top = lane({Z, Z, Z, Z, 4, 5, 6, 7, Z, Z, Z, Z, 8, 9, 10, 11});
  alignas(64) uint8_t u[16][16];
  for (int q = 0; q < 4; ++q) {
    __m512i h = _mm512_castsi128_si512(head[4 * q]);
    h = _mm512_inserti32x4(h, head[4 * q + 1], 1);
    h = _mm512_inserti32x4(h, head[4 * q + 2], 2);
    h = _mm512_inserti32x4(h, head[4 * q + 3], 3);
    const __m512i p1 = _mm512_and_si512(_mm512_shuffle_epi8(h, low), low_mask);
    const __m512i h4 = _mm512_and_si512(_mm512_srli_epi16(h, 4), _mm512_set1_epi8(0x0f));
    const __m512i p2 = _mm512_shuffle_epi8(h4, nib);
    // A 16-bit shift by 2 brings bits 6-7 of each byte to 4-5; the mask drops the rest.
    const __m512i p3 =
        _mm512_and_si512(_mm512_srli_epi16(_mm512_shuffle_epi8(h, top), 2), _mm512_set1_epi8(0x30));
    _mm512_store_si512(u[4 * q], _mm512_ternarylogic_epi32(p1, p2, p3, 0xFE));  // p1 | p2 | p3
  }
  __m128i x[16];
  for (int r = 0; r < 16; ++r) x[r] = _mm_load_si128(reinterpret_cast<const __m128i*>(u[r]));
  rows16_store_q4_k_scales(x, g);
}

// Q5_K's high-bit slices of the 16 rows (qh[r]: row r's 32 qh bytes), the bytes
// rows16_pack_q5_k_high_bits writes, in vectors. Output byte (p, c, i) of a row gathers bits 2p,
// 2p + 1 of its qh bytes 16c + 4s + i (s = 0..3) into bits 2s, 2s + 1: a byte shuffle puts those
// four bytes in one dword, two delta swaps transpose the dword's 4 x 4 two-bit fields, a second
// shuffle orders the row's dwords as (c, p), and rows16_transpose turns rows into lanes.
template <int kHighBits>
inline void pack_q5_k_high_bits(const uint8_t* const (&qh)[16], uint8_t* g) {
  const __m512i t4 =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m512i m6 = _mm512_set1_epi32(0x00CC00CC), m12 = _mm512_set1_epi32(0x0000F0F0);
  __m512i v[16];
  for (int r = 0; r < kRows16; r += 2) {
    __m512i w = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh[r]))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh[r + 1])), 1);
    w = _mm512_shuffle_epi8(w, t4);  // dword 4c + i: qh bytes 16c + 4s + i as bytes s
    // Field (s, p) at bit 8s + 2p to (p, s): swap within 2 x 2 blocks, then the blocks.
    __m512i t = _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi32(w, 6), w), m6);
    w = _mm512_ternarylogic_epi32(w, t, _mm512_slli_epi32(t, 6), 0x96);  // w ^ t ^ (t << 6)
    t = _mm512_and_si512(_mm512_xor_si512(_mm512_srli_epi32(w, 12), w), m12);
    w = _mm512_ternarylogic_epi32(w, t, _mm512_slli_epi32(t, 12), 0x96);
    w = _mm512_shuffle_epi8(w, t4);  // dword 4c + p: the row's output word (p, c)
    v[r] = w;
    v[r + 1] = _mm512_castsi256_si512(_mm512_extracti64x4_epi64(w, 1));
  }
  __m512i out[16];
  rows16_transpose(v, out);
  for (int c = 0; c < 2; ++c) {
    for (int p = 0; p < 4; ++p)
      _mm512_storeu_si512(g + kHighBits + 128 * p + 64 * c, out[4 * c + p]);
  }
}

// rows16_mix_q5_k over a whole block column, in vectors: per slice, the quant vector keeps
// bits 0-3, takes bit k of the high-bit vector into bit 4 and its own bits 4-6 into 5-7, and
// the high-bit vector's bit k takes the quant vector's bit 7 (k = 2(s % 4)). The 16-bit shifts
// move bits across bytes only into places the masks drop.
template <int kQuants, int kHighBits>
inline void mix_q5_k(uint8_t* g) {
  const __m512i low4 = _mm512_set1_epi8(0x0f), bit4 = _mm512_set1_epi8(0x10);
  const __m512i top3 = _mm512_set1_epi8(static_cast<char>(0xe0));
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 2; ++c) {
      uint8_t* hp = g + kHighBits + 128 * p + 64 * c;
      __m512i h = _mm512_loadu_si512(hp);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        uint8_t* qp = g + kQuants + 512 * p + 64 * (4 * c + j);
        const __m512i q = _mm512_loadu_si512(qp);
        const int k = 2 * j;
        const __m512i f4 = k <= 4 ? _mm512_slli_epi16(h, 4 - k) : _mm512_srli_epi16(h, k - 4);
        // (low4 & q) | (f4 & 0x10), then (top3 & (q << 1)) | that: truth table 0xEA
        const __m512i lo5 = _mm512_ternarylogic_epi32(low4, q, _mm512_and_si512(f4, bit4), 0xEA);
        _mm512_storeu_si512(qp,
                            _mm512_ternarylogic_epi32(top3, _mm512_slli_epi16(q, 1), lo5, 0xEA));
        const __m512i at_k = _mm512_set1_epi8(static_cast<char>(1 << k));
        h = _mm512_ternarylogic_epi32(at_k, _mm512_srli_epi16(q, 7 - k), h, 0xCA);
      }
      _mm512_storeu_si512(hp, h);
    }
  }
}

// Rows16::repack, AVX-512, for Q4_K (kHighBits < 0) and Q5_K: each row's d and dmin as the
// scalar pack writes them, the scales and mins (and Q5_K's high bits) of the 16 rows in vectors
// (pack_q4_k_scales, pack_q5_k_high_bits), and each row's 32 quant dwords (dword 8p + s goes to
// slice s of pair p) turned into the layout's vectors by two rows16_transpose. The same bytes as
// the scalar repack.
template <typename L, typename B, int kQuants, int kHighBits>
void repack_q4_k(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += L::kBlockBytes) {
    __m512i v[2][16];  // [half][row]: the row's quant dwords 16 half .. 16 half + 15
    __m128i head[16];
    const uint8_t* qh[16];  // Q5_K
    for (int r = 0; r < kRows16; ++r) {
      const B& b = rows16_row<B>(src, r, src_row_bytes)[i];
      std::memcpy(g + 2 * r, &b.d, 2);
      std::memcpy(g + 32 + 2 * r, &b.dmin, 2);
      head[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b));
      if constexpr (kHighBits >= 0) qh[r] = b.qh;
      v[0][r] = _mm512_loadu_si512(b.qs);
      v[1][r] = _mm512_loadu_si512(b.qs + 64);
    }
    pack_q4_k_scales(head, g);
    if constexpr (kHighBits >= 0) pack_q5_k_high_bits<kHighBits>(qh, g);
    for (int h = 0; h < 2; ++h) {
      __m512i out[16];
      rows16_transpose(v[h], out);
      for (int m = 0; m < 16; ++m) {
        const int d = 16 * h + m;
        _mm512_storeu_si512(g + kQuants + 512 * (d / 8) + 64 * (d % 8), out[m]);
      }
    }
    if constexpr (kHighBits >= 0) mix_q5_k<kQuants, kHighBits>(g);
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q4_k_repack_avx512 =
    repack_q4_k<Rows16Q4_K, BlockQ4_K, kRows16Q4_KQuants, -1>;
Rows16RepackKernel* const rows16_q5_k_repack_avx512 =
    repack_q4_k<Rows16Q5_K, BlockQ5_K, kRows16Q5_KQuants, kRows16Q5_KHighBits>;
Rows16DotKernel* const rows16_q4_k_dot_avx512 =
    rows16_dot_tuned<Q4_KKernel<3072, 0>, Q4_KKernel<4096, 8192>>;
Rows16DotKernel* const rows16_q5_k_dot_avx512 =
    rows16_dot_tuned<Q5_KKernel<3072, 0>, Q5_KKernel<6144, 12288>>;
Rows16PairKernel* const rows16_q4_k_dot_pair_avx512 =
    rows16_dot_pair<Rows16PairBlocks<Q4_KAvx512<kRows16Q4_KQuants, -1, 0, 0>, Rows16Q4_K>>;
Rows16PairKernel* const rows16_q5_k_dot_pair_avx512 = rows16_dot_pair<
    Rows16PairBlocks<Q4_KAvx512<kRows16Q5_KQuants, kRows16Q5_KHighBits, 0, 0>, Rows16Q5_K>>;

}  // namespace hearth::quant
