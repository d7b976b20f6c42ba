// AVX2 + FMA + F16C dot kernels. Built with AVX2 flags; called only when
// isa_supported(kAvx2). Same integer sums per block as the scalar reference; the K-quant and
// Q8_0 kernels take its float steps too (block_steps.h), so they give its bits.
//
// K-quants: vpmaddubsw (unsigned weight quants x signed Q8_K bytes -> 16-bit pair sums, no
// saturation since |q| * 127 * 2 < 2^15), then vpmaddwd with the sub-block scale as 16-bit
// words folds the scale in while widening to 32 bits.
#include <immintrin.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/rows4_steps_x86.h"
#include "hearth/quant/x86_dot_common.h"

namespace hearth::quant {
namespace {

inline __m256i loadu(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// pshufb masks that broadcast word k of each 128-bit lane to the whole lane.
inline __m256i word_broadcast_mask(int k) {
  const char lo = static_cast<char>(2 * k), hi = static_cast<char>(2 * k + 1);
  return _mm256_setr_epi8(lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,
                          lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi);
}

// The sums of the 8 int32 lanes of a and b in lanes 0 and 1 (and again in 2 and 3), exact.
inline __m128i hsum256_epi32_x2(__m256i a, __m256i b) {
  const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b4 = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  const __m128i h = _mm_hadd_epi32(a4, b4);  // a01 a23 b01 b23
  return _mm_hadd_epi32(h, h);
}

// ---- Q4_K / Q5_K x Q8_K ------------------------------------------------------------
// A super-block's scaled sums and mins terms for one token, in 8 lanes each.
struct KSums {
  __m256i scaled, mins;
};

// Super-block xb's KSums against activation blocks yb[t] of NT tokens (the weight decode shared
// by the tokens), its sub-block scales and mins given as 16-bit words: mins16 holds m[g / 2] in
// word g (for the 16 bsums), and scales(c, &s_lo, &s_hi) gives the words of chunk c's two
// scales (every word of s_lo sub-block 2c's, of s_hi sub-block 2c + 1's).
template <typename Block, typename Nibbles, int NT, typename Scales>
[[gnu::always_inline]] inline void k_nibbles_sums(const Block& xb, const BlockQ8_K* const (&yb)[NT],
                                                  __m256i mins16, Scales scales, KSums (&s)[NT]) {
  for (int t = 0; t < NT; ++t) {
    s[t].mins = _mm256_madd_epi16(mins16, loadu(yb[t]->bsums));
    s[t].scaled = _mm256_setzero_si256();
  }
  Nibbles nibbles(xb);
  for (int c = 0; c < 4; ++c) {
    __m256i lo, hi, s_lo, s_hi;
    nibbles.chunk(c, &lo, &hi);
    scales(c, &s_lo, &s_hi);
    for (int t = 0; t < NT; ++t) {
      const __m256i p0 = _mm256_maddubs_epi16(lo, loadu(yb[t]->qs + 64 * c));
      const __m256i p1 = _mm256_maddubs_epi16(hi, loadu(yb[t]->qs + 64 * c + 32));
      s[t].scaled = _mm256_add_epi32(
          s[t].scaled, _mm256_add_epi32(_mm256_madd_epi16(p0, s_lo), _mm256_madd_epi16(p1, s_hi)));
    }
  }
}

// k_nibbles_sums with xb's scales and mins unpacked in general registers.
template <typename Block, typename Nibbles, int NT>
[[gnu::always_inline]] inline void k_nibbles_block_sums(const Block& xb,
                                                        const BlockQ8_K* const (&yb)[NT],
                                                        KSums (&s)[NT]) {
  uint64_t sc8, m8;
  unpack_q4k_scales_u64(xb.scales, &sc8, &m8);
  const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(
      _mm_cvtsi64_si128(static_cast<int64_t>(m8)), _mm_cvtsi64_si128(static_cast<int64_t>(m8))));
  // (8) scales as words in both 128-bit lanes.
  const __m256i sc16 =
      _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
  k_nibbles_sums<Block, Nibbles, NT>(
      xb, yb, mins16,
      [&](int c, __m256i* s_lo, __m256i* s_hi) __attribute__((always_inline)) {
        *s_lo = _mm256_shuffle_epi8(sc16, word_broadcast_mask(2 * c));
        *s_hi = _mm256_shuffle_epi8(sc16, word_broadcast_mask(2 * c + 1));
      },
      s);
}

// Per 64-element chunk c, Nibbles(x).chunk(c, &lo, &hi) gives the unsigned quants of
// sub-blocks 2c (lo) and 2c + 1 (hi) as bytes. NT activation rows a_stride bytes apart at
// once (prefill: the weight decode shared by the tokens); one integer sum per token and
// super-block, whose order of exact additions does not change it, so every token count
// gives vec_dot's bits.
template <typename Block, typename Nibbles, int NT = 1, size_t kL2Ahead = 0>
void dot_k_nibbles_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const BlockQ8_K* ys[NT];
  q8_k_rows<NT>(a, a_stride, ys);
  const auto block_sums = [&](int64_t i, KSums(&s)[NT]) __attribute__((always_inline)) {
    prefetch_l2_ahead<kL2Ahead, sizeof(Block)>(x + i);
    const BlockQ8_K* yb[NT];
    for (int t = 0; t < NT; ++t) yb[t] = ys[t] + i;
    k_nibbles_block_sums<Block, Nibbles, NT>(x[i], yb, s);
  };
  const auto step = [&](float acc, int64_t i, int t, float scaled, float mins)
      __attribute__((always_inline)) {
    return k_block_step_f(acc, h2f(x[i].d), h2f(x[i].dmin), ys[t][i].d, scaled, mins);
  };
  float acc[NT] = {};
  const int64_t nb = n / kQKK;
  if constexpr (NT == 1) {
    // Blocks in pairs, their four vectors reduced by one tree of three vphaddd (two blocks one
    // at a time took four vphaddd and four lane extracts).
    const KSums zero{_mm256_setzero_si256(), _mm256_setzero_si256()};
    for_block_pairs<1>(
        nb, zero, block_sums, [&](int64_t i, const KSums* sa, const KSums* sb, bool both) {
          const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(sa[0].scaled, sa[0].mins),
                                              _mm256_hadd_epi32(sb[0].scaled, sb[0].mins));
          // (scaled a, mins a, scaled b, mins b)
          const __m128 f = _mm_cvtepi32_ps(
              _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
          acc[0] = step(acc[0], i, 0, _mm_cvtss_f32(f), _mm_cvtss_f32(_mm_movehdup_ps(f)));
          if (!both) return;
          const __m128 g = _mm_movehl_ps(f, f);
          acc[0] = step(acc[0], i + 1, 0, _mm_cvtss_f32(g), _mm_cvtss_f32(_mm_movehdup_ps(g)));
        });
  } else {
    // One block at a time: two blocks' sums for several tokens at once need more than AVX2's
    // 16 registers.
    for (int64_t i = 0; i < nb; ++i) {
      KSums s[NT];
      block_sums(i, s);
      for (int t = 0; t < NT; ++t) {
        const __m128 f = _mm_cvtepi32_ps(hsum256_epi32_x2(s[t].scaled, s[t].mins));
        acc[t] = step(acc[t], i, t, _mm_cvtss_f32(f), _mm_cvtss_f32(_mm_movehdup_ps(f)));
      }
    }
  }
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

template <typename Block, typename Nibbles, size_t kL2Ahead = 0>
void dot_k_nibbles(int64_t n, const void* w, const void* a, float* out) {
  dot_k_nibbles_multi<Block, Nibbles, 1, kL2Ahead>(n, w, a, 0, out);
}

struct Q4KNibbles {
  const BlockQ4_K& x;
  const __m256i m4 = _mm256_set1_epi8(0x0f);

  explicit Q4KNibbles(const BlockQ4_K& b) : x(b) {}
  void chunk(int c, __m256i* lo, __m256i* hi) const {
    const __m256i qs = loadu(x.qs + 32 * c);
    *lo = _mm256_and_si256(qs, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
  }
};

// The fifth bits of chunk c are qh bits 2c (lo) and 2c + 1 (hi), each moved to bit 4 (16) of
// its byte by one 16-bit shift and a mask: a shift by at most 4 either way keeps bit 4 of each
// byte within its byte's own bits (two ops a fifth bit where a compare took three).
struct Q5KNibbles {
  const BlockQ5_K& x;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i sixteen = _mm256_set1_epi8(16);
  const __m256i qh;

  explicit Q5KNibbles(const BlockQ5_K& b) : x(b), qh(loadu(b.qh)) {}
  // 16 in each byte whose qh bit j (0..7) is set, else 0.
  __m256i fifth_bit(int j) const {
    const __m256i at4 = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4);
    return _mm256_and_si256(at4, sixteen);
  }
  void chunk(int c, __m256i* lo, __m256i* hi) const {
    const __m256i qs = loadu(x.qs + 32 * c);
    *lo = _mm256_or_si256(_mm256_and_si256(qs, m4), fifth_bit(2 * c));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qs, 4), m4), fifth_bit(2 * c + 1));
  }
};

// ---- Q6_K x Q8_K ------------------------------------------------------------------
// Block xb's exact integer sum (8 lanes) against activation blocks *yb[t] of NT tokens.
template <int NT>
[[gnu::always_inline]] inline void q6_k_block_sums(const BlockQ6_K& xb,
                                                   const BlockQ8_K* const (&yb)[NT],
                                                   __m256i (&sum)[NT]) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i sc_all =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.scales)));
  for (int t = 0; t < NT; ++t) {
    // The -32 offset first: the sum of exact integers is the same in any order.
    sum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                              _mm256_slli_epi32(_mm256_madd_epi16(sc_all, loadu(yb[t]->bsums)), 5));
  }
  for (int h = 0; h < 2; ++h) {
    // Scales 8h..8h+7 as words in both lanes; vector k of this half needs groups 2k, 2k+1
    // in the low and high lane respectively.
    const __m256i sc16 = h == 0 ? _mm256_permute2x128_si256(sc_all, sc_all, 0x00)
                                : _mm256_permute2x128_si256(sc_all, sc_all, 0x11);
    const __m256i ql0 = loadu(xb.ql + 64 * h);
    const __m256i ql1 = loadu(xb.ql + 64 * h + 32);
    const __m256i qh = loadu(xb.qh + 32 * h);
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
        _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                        _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
    };
    for (int k = 0; k < 4; ++k) {
      const __m256i s = _mm256_shuffle_epi8(
          sc16, _mm256_inserti128_si256(
                    _mm256_castsi128_si256(_mm256_castsi256_si128(word_broadcast_mask(2 * k))),
                    _mm256_castsi256_si128(word_broadcast_mask(2 * k + 1)), 1));
      for (int t = 0; t < NT; ++t) {
        const __m256i p = _mm256_maddubs_epi16(q[k], loadu(yb[t]->qs + 128 * h + 32 * k));
        sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(p, s));
      }
    }
  }
}

// Unsigned quants 0..63; the -32 offset is 32 * sum_g scale[g] * bsums[g] per super-block.
// NT activation rows at once as dot_k_nibbles_multi (one exact integer sum per token and
// super-block, so every token count gives vec_dot's bits).
template <int NT = 1, size_t kL2Ahead = 0>
void dot_q6_k_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* ys[NT];
  q8_k_rows<NT>(a, a_stride, ys);
  // Block i's exact integer sum for each token, in 8 lanes.
  auto block_sum = [&](int64_t i, __m256i(&sum)[NT]) {
    prefetch_l2_ahead<kL2Ahead, sizeof(BlockQ6_K)>(x + i);
    const BlockQ8_K* yb[NT];
    for (int t = 0; t < NT; ++t) yb[t] = ys[t] + i;
    q6_k_block_sums<NT>(x[i], yb, sum);
  };
  float acc[NT] = {};
  const int64_t nb = n / kQKK;
  // Blocks in pairs, their sums reduced together (hsum256_epi32_x2).
  for_block_pairs<NT>(nb, _mm256_setzero_si256(), block_sum,
                      [&](int64_t i, const __m256i* sa, const __m256i* sb, bool both) {
                        for (int t = 0; t < NT; ++t) {
                          const __m128 f = _mm_cvtepi32_ps(hsum256_epi32_x2(sa[t], sb[t]));
                          acc[t] =
                              q6_k_block_step_f(acc[t], h2f(x[i].d), ys[t][i].d, _mm_cvtss_f32(f));
                          if (!both) continue;
                          acc[t] = q6_k_block_step_f(acc[t], h2f(x[i + 1].d), ys[t][i + 1].d,
                                                     _mm_cvtss_f32(_mm_movehdup_ps(f)));
                        }
                      });
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

template <size_t kL2Ahead = 0>
void dot_q6_k(int64_t n, const void* w, const void* a, float* out) {
  dot_q6_k_multi<1, kL2Ahead>(n, w, a, 0, out);
}

// ---- K-quants, four weight rows a call (TypeTraits::vec_dot_rows4) ---------------------
// Each row's super-block sums as its one-row kernel forms them; per block, the four rows' sums
// are reduced together and their steps taken side by side (lane r: row r's fma, the one-row
// kernel's single rounding), which saves each row the lane extractions and scalar steps.

// Lane r: the sum of the 8 lanes of v[r], exact.
inline __m128i hsum_rows4_epi32(const __m256i (&v)[4]) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// The first 16 bytes of two K-quant super-blocks (d, dmin and the 12 scale bytes), one block
// per 128-bit lane, with the scale fields unpacked as unpack_q4k_scales does: lane bytes 0-3
// sc0-3, 4-7 m0-3, 8-11 sc4-7, 12-15 m4-7. In vectors, two rows a time, where the one-row
// kernel spends about fifteen general-register instructions a block (unpack_q4k_scales_u64),
// which share their ports with the vector work.
inline __m256i unpack_k_scales2(__m256i head) {
  // Dwords of each lane: w0 = d | dmin, w1, w2, w3 = the 12 scale bytes.
  const __m256i w1w2w3w3 = _mm256_shuffle_epi32(head, 0xF9);
  const __m256i shifted = _mm256_srlv_epi32(w1w2w3w3, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4));
  const __m256i low_bits =
      _mm256_and_si256(shifted, _mm256_setr_epi32(0x3f3f3f3f, 0x3f3f3f3f, 0x0f0f0f0f, 0x0f0f0f0f,
                                                  0x3f3f3f3f, 0x3f3f3f3f, 0x0f0f0f0f, 0x0f0f0f0f));
  // sc4-7 and m4-7 take bits 4-5 from the top two bits of w1 and w2's bytes.
  const __m256i w1w2w1w2 = _mm256_shuffle_epi32(head, 0x99);
  const __m256i high_bits = _mm256_and_si256(
      _mm256_srli_epi32(w1w2w1w2, 2),
      _mm256_setr_epi32(0, 0, 0x30303030, 0x30303030, 0, 0, 0x30303030, 0x30303030));
  return _mm256_or_si256(low_bits, high_bits);
}

// pshufb masks over an unpack_k_scales2 lane: scale j (0..7) zero-extended into every word.
inline __m256i k_scale_words_mask(int j) {
  const char b = static_cast<char>(j < 4 ? j : 8 + j - 4), z = static_cast<char>(0x80);
  return _mm256_setr_epi8(b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b, z, b,
                          z, b, z, b, z, b, z);
}

template <typename Block, typename Nibbles>
void dot_k_nibbles_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  const size_t ahead = rows4_l2_ahead(w_stride);
  const __m128 sign = _mm_set1_ps(-0.0f);
  // Word g of the mins: m[g / 2] (the low lane takes m0-3, the high one m4-7).
  const char z = static_cast<char>(0x80);
  const __m256i mins_mask = _mm256_setr_epi8(4, z, 4, z, 5, z, 5, z, 6, z, 6, z, 7, z, 7, z, 12, z,
                                             12, z, 13, z, 13, z, 14, z, 14, z, 15, z, 15, z);
  // d | dmin of rows 0-3 (dword 0 of each row's lane).
  const __m256i first_dwords = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const BlockQ8_K* const yb[1] = {y + i};
    const auto head = [&](int r) {
      const Block& xb = reinterpret_cast<const Block*>(pw + r * w_stride)[i];
      prefetch_l2_at<sizeof(Block)>(&xb, ahead);
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(&xb));
    };
    const __m256i h01 = _mm256_inserti128_si256(_mm256_castsi128_si256(head(0)), head(1), 1);
    const __m256i h23 = _mm256_inserti128_si256(_mm256_castsi128_si256(head(2)), head(3), 1);
    const __m256i u[2] = {unpack_k_scales2(h01), unpack_k_scales2(h23)};
    __m256i scaled[4], mins[4];
    for (int r = 0; r < 4; ++r) {
      const Block& xb = reinterpret_cast<const Block*>(pw + r * w_stride)[i];
      // Row r's unpacked scales in both lanes.
      const __m256i ur = r % 2 == 0 ? _mm256_permute2x128_si256(u[r / 2], u[r / 2], 0x00)
                                    : _mm256_permute2x128_si256(u[r / 2], u[r / 2], 0x11);
      KSums s[1];
      k_nibbles_sums<Block, Nibbles, 1>(
          xb, yb, _mm256_shuffle_epi8(ur, mins_mask),
          [&](int c, __m256i* s_lo, __m256i* s_hi) __attribute__((always_inline)) {
            *s_lo = _mm256_shuffle_epi8(ur, k_scale_words_mask(2 * c));
            *s_hi = _mm256_shuffle_epi8(ur, k_scale_words_mask(2 * c + 1));
          },
          s);
      scaled[r] = s[0].scaled;
      mins[r] = s[0].mins;
    }
    // (8) halves d0, dmin0, d1, dmin1, ... as floats.
    const __m256 f = _mm256_cvtph_ps(
        _mm_unpacklo_epi64(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(h01, first_dwords)),
                           _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(h23, first_dwords))));
    const __m128 lo = _mm256_castps256_ps128(f), hi = _mm256_extractf128_ps(f, 1);
    const __m128 da = _mm_set1_ps(y[i].d);
    // k_block_step_f: fma(d * da, scaled, acc), then fma(-(dmin * da), mins, acc).
    const __m128 fd = _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), da);
    const __m128 fm =
        _mm_xor_ps(_mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), da), sign);
    acc = _mm_fmadd_ps(fd, _mm_cvtepi32_ps(hsum_rows4_epi32(scaled)), acc);
    acc = _mm_fmadd_ps(fm, _mm_cvtepi32_ps(hsum_rows4_epi32(mins)), acc);
  }
  _mm_storeu_ps(out, acc);
}

void dot_q6_k_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const auto* pw = static_cast<const uint8_t*>(w);
  const size_t ahead = rows4_l2_ahead(w_stride);
  __m128 acc = _mm_setzero_ps();
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const BlockQ8_K* const yb[1] = {y + i};
    __m256i sums[4];
    alignas(8) uint16_t d[4];
    for (int r = 0; r < 4; ++r) {
      const BlockQ6_K& xb = reinterpret_cast<const BlockQ6_K*>(pw + r * w_stride)[i];
      prefetch_l2_at<sizeof(BlockQ6_K)>(&xb, ahead);
      __m256i sum[1];
      q6_k_block_sums<1>(xb, yb, sum);
      sums[r] = sum[0];
      d[r] = xb.d;
    }
    // q6_k_block_step_f: fma(d * da, sum, acc).
    const __m128 fd = _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(d))),
                                 _mm_set1_ps(y[i].d));
    acc = _mm_fmadd_ps(fd, _mm_cvtepi32_ps(hsum_rows4_epi32(sums)), acc);
  }
  _mm_storeu_ps(out, acc);
}

// ---- Q8_0 / Q4_0 x Q8_0 ---------------------------------------------------------------
// Signed x signed with vpmaddubsw: |w| (unsigned) times a with w's sign. Activations are
// never -128 (our quantizer clamps to +-127), so 128 * 127 * 2 fits in 16 bits.
inline __m256i dot_s8_32(__m256i wq, __m256i aq) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(aq, wq));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// The (8) int32 exact dots of eight blocks, lane b = block b, from their partial sums v[b]
// (8 lanes each): a vphaddd tree per 128-bit half, then the halves added.
inline __m256i reduce_blocks8(const __m256i* v) {
  // Per 128-bit half: h0 = blocks 0..3, h1 = blocks 4..7 (partials of that half).
  const __m256i h0 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i h1 =
      _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20),
                          _mm256_permute2x128_si256(h0, h1, 0x31));
}

// acc after the block steps (block_steps.h) of eight blocks in order, whose scales and exact
// sums (as floats) are lanes 0..7 of sc and fi.
inline float q8_0_steps8(float acc, __m256 sc, __m256 fi) {
  acc = q8_0_steps4(acc, _mm256_castps256_ps128(sc), _mm256_castps256_ps128(fi));
  return q8_0_steps4(acc, _mm256_extractf128_ps(sc, 1), _mm256_extractf128_ps(fi, 1));
}

// Q8_0 x Q8_0 in groups of 8 blocks. As in the AVX-512 file, the decode kernel and the
// packed prefill kernel both end a group with one (8) int32 vector of the blocks' exact
// integer dots (lane b = block b) and one of their scales, then take the row's float sum
// through the blocks' steps in order (q8_0_steps8) and the scalar tail, so they give the
// reference's bits. Decode sums each block's 8 partial lanes with a vphaddd tree; prefill
// packs weights and activations as 4-byte columns of the 8 blocks so no per-block reduction
// is needed.
constexpr int kQ8Group = 8;

// Rows as stored: a group is its 8 blocks, unchanged.
using Q8Rows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ8_0), kQ8Group * sizeof(BlockQ8_0)>;

// The block scales (sc) and exact sums as floats (fi, lane b = block b) of a group of 8 blocks as
// stored at wg, against activation quants a_qs (block b's 32 at a_qs + b * a_stride) and
// scales a_scales (8 f32), prefetching the weights `ahead` bytes on into L2 (none for 0).
[[gnu::always_inline]] inline void q8_0_group8_sums(const uint8_t* wg, const uint8_t* a_qs,
                                                    size_t a_stride, __m256 a_scales, size_t ahead,
                                                    __m256* sc, __m256* fi) {
  prefetch_l2_at<kQ8Group * sizeof(BlockQ8_0)>(wg, ahead);
  const auto* xg = reinterpret_cast<const BlockQ8_0*>(wg);
  __m256i v[8];  // (8) i32 partial dots of block b
  for (int b = 0; b < 8; ++b) v[b] = dot_s8_32(loadu(xg[b].qs), loadu(a_qs + a_stride * b));
  *sc = _mm256_mul_ps(load_scales8(wg, sizeof(BlockQ8_0)), a_scales);
  *fi = _mm256_cvtepi32_ps(reduce_blocks8(v));
}

// acc after such a group, its steps in block order.
template <size_t kL2Ahead>
[[gnu::always_inline]] inline float q8_0_group8(float acc, const uint8_t* wg, const uint8_t* a_qs,
                                                size_t a_stride, __m256 a_scales) {
  __m256 sc, fi;
  q8_0_group8_sums(wg, a_qs, a_stride, a_scales, kL2Ahead, &sc, &fi);
  return q8_0_steps8(acc, sc, fi);
}

template <size_t kL2Ahead = 0>
void dot_q8_0(int64_t n, const void* w, const void* a, float* out) {
  Q8Rows::dot<1>(
      n, w, a, 0, out,
      [](const uint8_t* wg, const uint8_t* ag, float* acc) __attribute__((always_inline)) {
        const auto* yg = reinterpret_cast<const BlockQ8_0*>(ag);
        acc[0] = q8_0_group8<kL2Ahead>(acc[0], wg, reinterpret_cast<const uint8_t*>(yg->qs),
                                       sizeof(BlockQ8_0), load_scales8(ag, sizeof(BlockQ8_0)));
      });
}

// Decode activation rows prepared once per matvec (PreparedDot): per group of 8 blocks the
// (8) f32 scales, then the blocks' quants (32 bytes each); blocks after the last whole group
// follow unchanged. The kernel then reads the activation's scales with one load instead of
// composing them from eight fp16 fields in general registers, which share their ports with
// the vectors here. Same integer sums and steps as dot_q8_0, so its bits.
constexpr size_t kQ8PreparedA = 32 + kQ8Group * kQK0;
using Q8PreparedRows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ8_0), kQ8PreparedA>;

void q8_prepare(int64_t n, const void* act_row, void* dst) {
  Q8PreparedRows::pack(n, act_row, dst, kQ8PreparedA, [](const BlockQ8_0* yg, uint8_t* out) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out),
                     load_scales8(reinterpret_cast<const uint8_t*>(yg), sizeof(BlockQ8_0)));
    for (int b = 0; b < kQ8Group; ++b) std::memcpy(out + 32 + kQK0 * b, yg[b].qs, kQK0);
  });
}

template <size_t kL2Ahead = 0>
void dot_q8_0_prepared(int64_t n, const void* w, const void* a, float* out) {
  Q8PreparedRows::dot<1>(
      n, w, a, 0, out,
      [](const uint8_t* wg, const uint8_t* pg, float* acc) __attribute__((always_inline)) {
        acc[0] = q8_0_group8<kL2Ahead>(acc[0], wg, pg + 32, kQK0,
                                       _mm256_loadu_ps(reinterpret_cast<const float*>(pg)));
      });
}

// Four rows at once (PreparedDot::dot_rows4): each row's group sums as dot_q8_0_prepared's,
// the four rows' steps side by side (rows4_steps_x86.h).
void dot_q8_0_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  Q8PreparedRows::dot_rows4(
      n, w, w_stride, a, out,
      [](__m128 acc, auto wg, const uint8_t* ag, size_t ahead) __attribute__((always_inline)) {
        const __m256 a_scales = _mm256_loadu_ps(reinterpret_cast<const float*>(ag));
        __m256 sc[4], fi[4];
        for (int r = 0; r < 4; ++r) {
          q8_0_group8_sums(wg(r), ag + 32, kQK0, a_scales, ahead, &sc[r], &fi[r]);
        }
        return fma_steps_rows4<kQ8Group>(acc, sc, fi);
      },
      q8_rows4_tail);
}

constexpr PreparedDot kQ8PreparedDot{Q8PreparedRows::a_bytes,
                                     q8_prepare,
                                     dot_q8_0_prepared<>,
                                     dot_q8_0_prepared<kLongRowL2Ahead>,
                                     nullptr,
                                     dot_q8_0_prepared_rows4};

// Packed rows, per group of 8 blocks: weights = (8) f32 scales | (8, 8) 4-byte columns of |w|
// | (8, 8) columns of w; activations = (8) f32 scales | (8, 8) columns of a. Column j, lane b
// = bytes 4j..4j+3 of block b. Blocks after the last whole group follow unchanged.
constexpr size_t kQ8PackedW = 32 + 256 + 256;
constexpr size_t kQ8PackedA = 32 + 256;
using Q8PackedRows = Q8Packed<kQ8Group, kQ8PackedW, kQ8PackedA>;

// The 8 columns of a group, gathered from the blocks' quants.
inline void q8_columns(const BlockQ8_0* g, __m256i col[8]) {
  const __m256i off = _mm256_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238);
  static_assert(sizeof(BlockQ8_0) == 34);
  const auto* base = reinterpret_cast<const int*>(g->qs);
  for (int j = 0; j < 8; ++j) {
    col[j] = _mm256_i32gather_epi32(base, _mm256_add_epi32(off, _mm256_set1_epi32(4 * j)), 1);
  }
}

// A packed group starts with the (8) f32 scales of its blocks; col gets its 8 columns.
inline void q8_scales_columns(const BlockQ8_0* g, uint8_t* out, __m256i col[8]) {
  _mm256_storeu_ps(reinterpret_cast<float*>(out),
                   load_scales8(reinterpret_cast<const uint8_t*>(g), sizeof(BlockQ8_0)));
  q8_columns(g, col);
}

void q8_pack_w(int64_t n, const void* w_row, void* dst) {
  Q8PackedRows::pack(n, w_row, dst, kQ8PackedW, [](const BlockQ8_0* xg, uint8_t* out) {
    __m256i col[8];
    q8_scales_columns(xg, out, col);
    for (int j = 0; j < 8; ++j) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 + 32 * j),
                          _mm256_sign_epi8(col[j], col[j]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 288 + 32 * j), col[j]);
    }
  });
}

void q8_pack_a(int64_t n, const void* act_row, void* dst) {
  Q8PackedRows::pack(n, act_row, dst, kQ8PackedA, [](const BlockQ8_0* yg, uint8_t* out) {
    __m256i col[8];
    q8_scales_columns(yg, out, col);
    for (int j = 0; j < 8; ++j)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 + 32 * j), col[j]);
  });
}

// Four tokens per call; per token, column and group: the sign flip, vpmaddubsw, vpmaddwd
// and an add (no VNNI on plain AVX2), with |w| and w loaded once for the four tokens.
void q8_packed_dot_x4(int64_t n, const void* packed_w, const void* packed_a, size_t a_stride,
                      float* out) {
  constexpr int NT = 4;
  const __m256i ones = _mm256_set1_epi16(1);
  Q8PackedRows::dot<NT>(
      n, packed_w, packed_a, a_stride,
      out, [&](const uint8_t* wg, const uint8_t* ag, float* acc) __attribute__((always_inline)) {
        __m256i isum[NT];
        for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          const __m256i wabs = loadu(wg + 32 + 32 * j);
          const __m256i wq = loadu(wg + 288 + 32 * j);
          for (int t = 0; t < NT; ++t) {
            const __m256i aq = loadu(ag + t * a_stride + 32 + 32 * j);
            const __m256i p = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(aq, wq));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p, ones));
          }
        }
        const __m256 wd = _mm256_loadu_ps(reinterpret_cast<const float*>(wg));
        for (int t = 0; t < NT; ++t) {
          const __m256 sc =
              _mm256_mul_ps(wd, _mm256_loadu_ps(reinterpret_cast<const float*>(ag + t * a_stride)));
          acc[t] = q8_0_steps8(acc[t], sc, _mm256_cvtepi32_ps(isum[t]));
        }
      });
}

constexpr PackedDot kQ8PackedDot{Q8PackedRows::w_bytes, Q8PackedRows::a_bytes, q8_pack_w, q8_pack_a,
                                 q8_packed_dot_x4};

// Q4_0 nibbles -> signed quants -8..7 in element order, then the signed dot.
inline __m256i q4_0_block_dot(const BlockQ4_0& xb, const BlockQ8_0& yb) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xb.qs));
  const __m256i nib =
      _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
                       _mm256_set1_epi8(0x0f));
  return dot_s8_32(_mm256_sub_epi8(nib, _mm256_set1_epi8(8)), loadu(yb.qs));
}

// acc after Q4_0's quad steps (block_steps.h) over eight blocks whose scales and exact sums
// (as floats) are lanes 0..7 of sc and fi: the two quads' sums side by side in lanes 0 and 1
// (unpacks pair block k with block 4 + k), then added in quad order.
inline float q4_0_steps8(float acc, __m256 sc, __m256 fi) {
  const __m128 s_lo = _mm256_castps256_ps128(sc), s_hi = _mm256_extractf128_ps(sc, 1);
  const __m128 f_lo = _mm256_castps256_ps128(fi), f_hi = _mm256_extractf128_ps(fi, 1);
  const __m128 s01 = _mm_unpacklo_ps(s_lo, s_hi), f01 = _mm_unpacklo_ps(f_lo, f_hi);  // 0 4 1 5
  const __m128 s23 = _mm_unpackhi_ps(s_lo, s_hi), f23 = _mm_unpackhi_ps(f_lo, f_hi);  // 2 6 3 7
  __m128 q = _mm_fmadd_ps(s01, f01, _mm_setzero_ps());
  q = _mm_fmadd_ps(_mm_movehl_ps(s01, s01), _mm_movehl_ps(f01, f01), q);
  q = _mm_fmadd_ps(s23, f23, q);
  q = _mm_fmadd_ps(_mm_movehl_ps(s23, s23), _mm_movehl_ps(f23, f23), q);
  acc = q4_0_quad_end(acc, _mm_cvtss_f32(q));
  return q4_0_quad_end(acc, _mm_cvtss_f32(_mm_movehdup_ps(q)));
}

// Q4_0 in groups of 8 blocks: each block's exact dot (q4_0_block_dot, a vphaddd tree to one
// lane per block), the eight scales converted together, then the quad steps; the blocks
// after the last whole group continue the quads in scalar code.
template <size_t kL2Ahead = 0>
void dot_q4_0(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t nb = n / kQK0;
  float acc = 0;
  int64_t i = 0;
  for (; i + 8 <= nb; i += 8) {
    prefetch_l2_ahead<kL2Ahead, 8 * sizeof(BlockQ4_0)>(x + i);
    __m256i v[8];
    for (int b = 0; b < 8; ++b) v[b] = q4_0_block_dot(x[i + b], y[i + b]);
    const __m256 sc =
        _mm256_mul_ps(load_scales8(reinterpret_cast<const uint8_t*>(x + i), sizeof(BlockQ4_0)),
                      load_scales8(reinterpret_cast<const uint8_t*>(y + i), sizeof(BlockQ8_0)));
    acc = q4_0_steps8(acc, sc, _mm256_cvtepi32_ps(reduce_blocks8(v)));
  }
  *out = q4_tail(acc, x + i, y + i, nb - i);
}

// Prepared Q4_0 decode (PreparedDot): per group of 8 blocks the activation holds (8) f32
// scales, (8) i32 corrections -8 * sum(a), then per block pair p (blocks 2p, 2p + 1) two
// 32-byte vectors: elements 0-15 of both blocks (one per 128-bit lane), then elements 16-31.
// Blocks after the last whole group follow unchanged. One 32-byte vector then holds a pair's
// 32 quant bytes, whose low nibbles (elements 0-15) and high nibbles (16-31) meet the two
// activation vectors in vpmaddubsw (unsigned times signed, pairs within 2 * 15 * 127); the two
// products add as words (within 4 * 15 * 127) and one vpmaddwd widens them, each 128-bit lane
// holding its block's sum in four parts. Three vphaddd then sum the group (eight blocks one
// per vector took six, two lane permutes and an add), and the -8 offset comes in once per
// block from the correction: exactly the integer sum dot_q4_0 forms, so its bits.
constexpr size_t kQ4PreparedA = 32 + 32 + 8 * kQK0;
using Q4PreparedRows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ4_0), kQ4PreparedA>;

size_t q4_prepared_bytes(int64_t n) {
  return Q4PreparedRows::a_bytes(n);
}

void q4_prepare(int64_t n, const void* act_row, void* dst) {
  Q4PreparedRows::pack(n, act_row, dst, kQ4PreparedA, [](const BlockQ8_0* yg, uint8_t* out) {
    _mm256_storeu_ps(reinterpret_cast<float*>(out),
                     load_scales8(reinterpret_cast<const uint8_t*>(yg), sizeof(BlockQ8_0)));
    for (int b = 0; b < kQ8Group; ++b) {
      int32_t sum = 0;
      for (int e = 0; e < kQK0; ++e) sum += yg[b].qs[e];
      const int32_t corr = -8 * sum;
      std::memcpy(out + 32 + 4 * b, &corr, 4);
    }
    for (int p = 0; p < kQ8Group / 2; ++p) {
      uint8_t* pair = out + 64 + 64 * p;
      for (int k = 0; k < 2; ++k) {
        std::memcpy(pair + 16 * k, yg[2 * p + k].qs, 16);
        std::memcpy(pair + 32 + 16 * k, yg[2 * p + k].qs + 16, 16);
      }
    }
  });
}

// Group ag's block scales (sc) and exact sums as floats (fi), lane b = block b, of the 8
// blocks at xg, prefetching the weights `ahead` bytes on into L2 (none for 0).
[[gnu::always_inline]] inline void q4_0_prepared_group8(const BlockQ4_0* xg, const uint8_t* ag,
                                                        size_t ahead, __m256* sc, __m256* fi) {
  const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
  // Lane order of the vphaddd tree below (blocks 0 2 4 6 | 1 3 5 7) back to block order.
  const __m256i to_block = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  prefetch_l2_at<kQ8Group * sizeof(BlockQ4_0)>(xg, ahead);
  __m256i v[4];  // pair p: lanes 0-3 block 2p's sum in parts, 4-7 block 2p + 1's
  for (int p = 0; p < 4; ++p) {
    const __m256i q = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xg[2 * p].qs))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(xg[2 * p + 1].qs)), 1);
    const __m256i lo = _mm256_and_si256(q, m4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    const __m256i words = _mm256_add_epi16(_mm256_maddubs_epi16(lo, loadu(ag + 64 + 64 * p)),
                                           _mm256_maddubs_epi16(hi, loadu(ag + 96 + 64 * p)));
    v[p] = _mm256_madd_epi16(words, ones);
  }
  const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
                                         _mm256_hadd_epi32(v[2], v[3]));  // 0 2 4 6 | 1 3 5 7
  const __m256i isum =
      _mm256_add_epi32(_mm256_permutevar8x32_epi32(sums, to_block),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ag + 32)));
  *sc = _mm256_mul_ps(load_scales8(reinterpret_cast<const uint8_t*>(xg), sizeof(BlockQ4_0)),
                      _mm256_loadu_ps(reinterpret_cast<const float*>(ag)));
  *fi = _mm256_cvtepi32_ps(isum);
}

template <size_t kL2Ahead = 0>
void dot_q4_0_prepared(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* pa = static_cast<const uint8_t*>(a);
  const int64_t nb = n / kQK0, ng = nb / kQ8Group;
  float acc = 0;
  for (int64_t g = 0; g < ng; ++g) {
    __m256 sc, fi;
    q4_0_prepared_group8(x + g * kQ8Group, pa + static_cast<size_t>(g) * kQ4PreparedA, kL2Ahead,
                         &sc, &fi);
    acc = q4_0_steps8(acc, sc, fi);
  }
  const auto* xt = x + ng * kQ8Group;
  const auto* yt = reinterpret_cast<const BlockQ8_0*>(pa + static_cast<size_t>(ng) * kQ4PreparedA);
  *out = q4_tail(acc, xt, yt, nb - ng * kQ8Group);
}

// Four rows at once (PreparedDot::dot_rows4): each row's group sums as dot_q4_0_prepared's; the
// four rows' scales and sums transposed (rows4_steps_x86.h) so that one fma takes block b of
// the four rows and one add a quad (Q4_0's quad steps, block_steps.h; lane r: row r's).
void dot_q4_0_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  Q4PreparedRows::dot_rows4(
      n, w, w_stride, a, out,
      [](__m128 acc, auto wg, const uint8_t* ag, size_t ahead) __attribute__((always_inline)) {
        __m256 sc[4], fi[4];
        for (int r = 0; r < 4; ++r) {
          q4_0_prepared_group8(reinterpret_cast<const BlockQ4_0*>(wg(r)), ag, ahead, &sc[r],
                               &fi[r]);
        }
        __m128 ts[8], tf[8];
        transpose_rows4x8(sc, ts);
        transpose_rows4x8(fi, tf);
        for (int quad = 0; quad < 2; ++quad) {
          __m128 q = _mm_fmadd_ps(ts[4 * quad], tf[4 * quad], _mm_setzero_ps());
          for (int k = 1; k < 4; ++k) q = _mm_fmadd_ps(ts[4 * quad + k], tf[4 * quad + k], q);
          acc = _mm_add_ps(acc, q);
        }
        return acc;
      },
      q4_rows4_tail);
}

constexpr PreparedDot kQ4PreparedDot{q4_prepared_bytes,
                                     q4_prepare,
                                     dot_q4_0_prepared<>,
                                     dot_q4_0_prepared<kLongRowL2Ahead>,
                                     nullptr,
                                     dot_q4_0_prepared_rows4};

}  // namespace

const PreparedDot* avx2_prepared_dot(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ4_0:
      return &kQ4PreparedDot;
    case gguf::TensorType::kQ8_0:
      return &kQ8PreparedDot;
    default:
      return nullptr;
  }
}

const PackedDot* avx2_packed_dot(gguf::TensorType type) {
  return type == gguf::TensorType::kQ8_0 ? &kQ8PackedDot : nullptr;
}

VecDotX4Fn avx2_vec_dot_x4(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ4_K:
      return dot_k_nibbles_multi<BlockQ4_K, Q4KNibbles, 4>;
    case gguf::TensorType::kQ5_K:
      return dot_k_nibbles_multi<BlockQ5_K, Q5KNibbles, 4>;
    case gguf::TensorType::kQ6_K:
      return dot_q6_k_multi<4>;
    default:
      return nullptr;
  }
}

VecDotFn avx2_vec_dot_long(gguf::TensorType type) {
  constexpr VecDots kDots{dot_k_nibbles<BlockQ4_K, Q4KNibbles, kLongRowL2Ahead>,
                          dot_k_nibbles<BlockQ5_K, Q5KNibbles, kLongRowL2Ahead>,
                          dot_q6_k<kLongRowL2Ahead>,
                          dot_q8_0<kLongRowL2Ahead>,
                          dot_q4_0<kLongRowL2Ahead>,
                          nullptr,
                          nullptr,
                          nullptr};
  return kDots.find(type);
}

VecDotRows4Fn avx2_vec_dot_rows4(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ4_K:
      return dot_k_nibbles_rows4<BlockQ4_K, Q4KNibbles>;
    case gguf::TensorType::kQ5_K:
      return dot_k_nibbles_rows4<BlockQ5_K, Q5KNibbles>;
    case gguf::TensorType::kQ6_K:
      return dot_q6_k_rows4;
    default:
      return nullptr;
  }
}

VecDotFn avx2_vec_dot(gguf::TensorType type) {
  constexpr VecDots kDots{dot_k_nibbles<BlockQ4_K, Q4KNibbles>,
                          dot_k_nibbles<BlockQ5_K, Q5KNibbles>,
                          dot_q6_k<>,
                          dot_q8_0<>,
                          dot_q4_0<>,
                          dot_f32,
                          dot_f16,
                          dot_bf16};
  return kDots.find(type);
}

}  // namespace hearth::quant
