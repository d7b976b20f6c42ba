// AVX-512 (F/BW/VL/DQ + VNNI) dot kernels. Built with AVX-512 flags; called only when
// isa_supported(kAvx512). Integer kernels compute the same per-block integer sums as the
// scalar reference (ref::dot_*), then take its float steps too, block by block (Q4_0: in quads
// of blocks; block_steps.h), so they give its bits, which are rows16's.
//
// Idiom for the K-quants: vpmaddubsw multiplies unsigned weight quants by signed Q8_K
// activations into 16-bit pair sums (no saturation: |q| * 127 * 2 stays below 2^15), then
// vpdpwssd multiplies those by the 16-bit sub-block scales and accumulates in 32 bits. This
// applies the per-sub-block scale inside the integer pipeline at one extra op per 64 weights.
#include <immintrin.h>

#include <array>
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
#include "hearth/quant/dpbusd_from_zero.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/x86_dot_common.h"

namespace hearth::quant {
namespace {

// ---- Q4_K x Q8_K ------------------------------------------------------------------
// Per 64-element chunk c: broadcast the 32 nibble bytes to both halves of a zmm and shift
// the upper half right by 4, so after masking lanes 0..31 hold sub-block 2c and lanes
// 32..63 sub-block 2c+1 — the same order as the 64 activation bytes 64c..64c+63.
struct Q4KChunks {
  const __m512i nib_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  // Word lane i of chunk c's scale vector takes scale 2c + i/16.
  __m512i sc_idx[4];

  Q4KChunks() {
    const __m512i sc_idx0 = _mm512_set_epi16(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0,
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i two = _mm512_set1_epi16(2);
    sc_idx[0] = sc_idx0;
    sc_idx[1] = _mm512_add_epi16(sc_idx0, two);
    sc_idx[2] = _mm512_add_epi16(sc_idx0, _mm512_add_epi16(two, two));
    sc_idx[3] = _mm512_add_epi16(sc_idx0, _mm512_set1_epi16(6));
  }

  // The 64 nibbles of chunk c (32 bytes at qs + 32c) as bytes in element order.
  __m512i nibbles(const uint8_t* qs, int c) const {
    return _mm512_and_si512(_mm512_srlv_epi64(_mm512_broadcast_i64x4(_mm256_loadu_si256(
                                                  reinterpret_cast<const __m256i*>(qs + 32 * c))),
                                              nib_shift),
                            m4);
  }
};

// A K-quant super-block's two exact integer sums, the scaled quant sum (16 lanes) and the
// mins term (8 lanes), as one vector: lanes 0..7 the first folded to 8 lanes, 8..15 the mins.
inline __m512i k_block_fold(__m512i sum, __m256i mins) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_add_epi32(
                                _mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1))),
                            mins, 1);
}

// The sums of two blocks' k_block_fold vectors a and b, reduced together and converted to float
// in one op each (the reduction is the decode loop's largest cost after the multiplies):
// lanes 0 and 2 of .scaled hold a's and b's scaled sums, of .mins their mins terms.
struct K2SumsF {
  __m128 scaled, mins;
};
inline K2SumsF k_block_sums2(__m512i a, __m512i b) {
  // Per 128-bit chunk: lanes 0 and 1 the chunk's pair sums of a, lanes 2 and 3 of b.
  const __m512i ta = _mm512_add_epi32(a, _mm512_shuffle_epi32(a, _MM_PERM_BADC));
  const __m512i tb = _mm512_add_epi32(b, _mm512_shuffle_epi32(b, _MM_PERM_BADC));
  __m512i u = _mm512_unpacklo_epi64(ta, tb);
  u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_CDAB));  // lane 0: a's chunk, 2: b's
  u = _mm512_add_epi32(u, _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512 f = _mm512_cvtepi32_ps(u);
  return {_mm512_castps512_ps128(f), _mm512_extractf32x4_ps(f, 2)};
}

// The lane sums of a and b, reduced together and converted to float: lanes 0 and 2.
inline __m128 pair_sums(__m512i a, __m512i b) {
  // (a's 16 lanes folded to 8, b's folded to 8)
  const __m512i v =
      _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xee));
  __m512i r = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
  r = _mm512_add_epi32(r, _mm512_shuffle_epi32(r, _MM_PERM_CDAB));
  r = _mm512_add_epi32(r, _mm512_shuffle_i32x4(r, r, _MM_SHUFFLE(2, 3, 0, 1)));  // lanes 0, 8
  const __m512 f = _mm512_cvtepi32_ps(r);
  return _mm_movelh_ps(_mm512_castps512_ps128(f), _mm512_extractf32x4_ps(f, 2));
}

// Q4_K and Q5_K, NT activation rows at once (matmul): the weight decode is shared, each token
// costs one vpmaddubsw and one vpdpwssd per 64 weights. Quants(x) gives chunk c's 64
// unsigned quants (Q4KQuants, Q5KQuants below); everything else is the same for both types.
template <typename Block, typename Quants, int NT>
void dot_k_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  const auto* x = static_cast<const Block*>(w);
  const BlockQ8_K* ys[NT];
  q8_k_rows<NT>(a, a_stride, ys);
  const Q4KChunks chunks;
  // Block i's sums for each token as one k_block_fold vector.
  auto block_sums = [&](int64_t i, __m512i(&folded)[NT]) {
    uint64_t sc8, m8;
    unpack_q4k_scales_u64(x[i].scales, &sc8, &m8);
    // Mins: sum_s m[s] * (bsums[2s] + bsums[2s+1]) via one 16-lane multiply-add.
    const __m128i m_pairs = _mm_unpacklo_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(m8)),
                                              _mm_cvtsi64_si128(static_cast<int64_t>(m8)));
    const __m256i mins16 = _mm256_cvtepu8_epi16(m_pairs);  // (16) m[g/2]
    const __m512i sc16 = _mm512_cvtepu8_epi16(_mm256_castsi128_si256(
        _mm_cvtsi64_si128(static_cast<int64_t>(sc8))));  // (32) words, first 8 are scales
    // Two chains per token (even and odd chunks) halve the latency from the loads to the sums.
    __m512i sum[NT][2];
    for (int t = 0; t < NT; ++t) sum[t][0] = sum[t][1] = _mm512_setzero_si512();
    Quants quants(chunks, x[i]);
    for (int c = 0; c < 4; ++c) {
      const __m512i q = quants.chunk(c);
      const __m512i sc = _mm512_permutexvar_epi16(chunks.sc_idx[c], sc16);
      for (int t = 0; t < NT; ++t) {
        const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(ys[t][i].qs + 64 * c));
        sum[t][c % 2] = _mm512_dpwssd_epi32(sum[t][c % 2], p, sc);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ys[t][i].bsums));
      folded[t] =
          k_block_fold(_mm512_add_epi32(sum[t][0], sum[t][1]), _mm256_madd_epi16(mins16, bsums));
    }
  };
  float acc[NT] = {};
  const int64_t nb = n / kQKK;
  // Blocks in pairs, their sums reduced together (k_block_sums2).
  for_block_pairs<NT>(nb, _mm512_setzero_si512(), block_sums,
                      [&](int64_t i, const __m512i* fa, const __m512i* fb, bool both) {
                        for (int t = 0; t < NT; ++t) {
                          const K2SumsF s = k_block_sums2(fa[t], fb[t]);
                          acc[t] = k_block_step_f(acc[t], h2f(x[i].d), h2f(x[i].dmin), ys[t][i].d,
                                                  _mm_cvtss_f32(s.scaled), _mm_cvtss_f32(s.mins));
                          if (!both) continue;
                          acc[t] = k_block_step_f(acc[t], h2f(x[i + 1].d), h2f(x[i + 1].dmin),
                                                  ys[t][i + 1].d,
                                                  _mm_cvtss_f32(_mm_movehl_ps(s.scaled, s.scaled)),
                                                  _mm_cvtss_f32(_mm_movehl_ps(s.mins, s.mins)));
                        }
                      });
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

struct Q4KQuants {
  const Q4KChunks& chunks;
  const BlockQ4_K& x;
  Q4KQuants(const Q4KChunks& ch, const BlockQ4_K& b) : chunks(ch), x(b) {}
  __m512i chunk(int c) const { return chunks.nibbles(x.qs, c); }
};

// Q5_K: the fifth bit comes from qh (bit 2c for lanes 0..31, 2c+1 for 32..63), added as +16
// under a byte mask. Chunks are taken in order (the bit selector steps per chunk).
struct Q5KQuants {
  const Q4KChunks& chunks;
  const BlockQ5_K& x;
  const __m512i qh;
  const __m512i sixteen = _mm512_set1_epi8(16);
  // Bit selectors: bytes 0..31 select bit 2c, bytes 32..63 bit 2c+1.
  __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
  Q5KQuants(const Q4KChunks& ch, const BlockQ5_K& b)
      : chunks(ch),
        x(b),
        qh(_mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)))) {}
  __m512i chunk(int c) {
    const __m512i q = chunks.nibbles(x.qs, c);
    const __m512i with_fifth = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bits), q, sixteen);
    bits = _mm512_add_epi8(bits, bits);
    bits = _mm512_add_epi8(bits, bits);
    return with_fifth;
  }
};

template <int NT>
void dot_q4_k_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  dot_k_multi<BlockQ4_K, Q4KQuants, NT>(n, w, a, a_stride, out);
}

void dot_q4_k(int64_t n, const void* w, const void* a, float* out) {
  dot_q4_k_multi<1>(n, w, a, 0, out);
}

// ---- Q5_K x Q8_K: dot_k_multi with Q5KQuants ---------------------------------------
template <int NT>
void dot_q5_k_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  dot_k_multi<BlockQ5_K, Q5KQuants, NT>(n, w, a, a_stride, out);
}

void dot_q5_k(int64_t n, const void* w, const void* a, float* out) {
  dot_q5_k_multi<1>(n, w, a, 0, out);
}

// ---- Q6_K x Q8_K ------------------------------------------------------------------
// Quants are used unsigned (0..63) and the -32 offset is applied once per super-block as
// 32 * sum_g scale[g] * bsums[g]. Per half h: the 64 ql bytes give elements 0..63 (low
// nibbles) and 64..127 (high); qh is broadcast and shifted per 256-bit half so bits 4-5
// of each byte hold the right two high bits.
template <int NT>
void dot_q6_k_multi(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* ys[NT];
  q8_k_rows<NT>(a, a_stride, ys);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i shl_lo = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);  // elements 0..31, 32..63
  const __m512i shr_hi = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);  // 64..95, 96..127
  // Vector k (64 elements) uses group scales 4k..4k+3, 8 word lanes each.
  const __m512i sc_idx0 = _mm512_set_epi16(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
                                           1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i four = _mm512_set1_epi16(4);
  const __m512i sc_idx[4] = {sc_idx0, _mm512_add_epi16(sc_idx0, four),
                             _mm512_add_epi16(sc_idx0, _mm512_set1_epi16(8)),
                             _mm512_add_epi16(sc_idx0, _mm512_set1_epi16(12))};
  // Block i's exact integer sum for each token, in 16 lanes; two chains (one per half).
  auto block_sum = [&](int64_t i, __m512i(&sum)[NT]) {
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    const __m512i scz = _mm512_castsi256_si512(sc16);
    __m512i half_sum[NT][2];
    for (int t = 0; t < NT; ++t) {
      // zextsi256 zeroes lanes 8..15: the offset 32 * scale * group sum lands once per group.
      const __m256i offset = _mm256_slli_epi32(
          _mm256_madd_epi16(sc16,
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ys[t][i].bsums))),
          5);
      half_sum[t][0] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(offset));
      half_sum[t][1] = _mm512_setzero_si512();
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(x[i].ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qh + 32 * h)));
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                         _mm512_and_si512(_mm512_sllv_epi64(qh, shl_lo), m30));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                         _mm512_and_si512(_mm512_srlv_epi64(qh, shr_hi), m30));
      const __m512i s0 = _mm512_permutexvar_epi16(sc_idx[2 * h], scz);
      const __m512i s1 = _mm512_permutexvar_epi16(sc_idx[2 * h + 1], scz);
      for (int t = 0; t < NT; ++t) {
        const __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512(ys[t][i].qs + 128 * h));
        const __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512(ys[t][i].qs + 128 * h + 64));
        half_sum[t][h] = _mm512_dpwssd_epi32(half_sum[t][h], p0, s0);
        half_sum[t][h] = _mm512_dpwssd_epi32(half_sum[t][h], p1, s1);
      }
    }
    for (int t = 0; t < NT; ++t) sum[t] = _mm512_add_epi32(half_sum[t][0], half_sum[t][1]);
  };
  float acc[NT] = {};
  const int64_t nb = n / kQKK;
  // Blocks in pairs, their sums reduced together (pair_sums).
  for_block_pairs<NT>(nb, _mm512_setzero_si512(), block_sum,
                      [&](int64_t i, const __m512i* sa, const __m512i* sb, bool both) {
                        for (int t = 0; t < NT; ++t) {
                          const __m128 f = pair_sums(sa[t], sb[t]);
                          acc[t] =
                              q6_k_block_step_f(acc[t], h2f(x[i].d), ys[t][i].d, _mm_cvtss_f32(f));
                          if (!both) continue;
                          acc[t] = q6_k_block_step_f(acc[t], h2f(x[i + 1].d), ys[t][i + 1].d,
                                                     _mm_cvtss_f32(_mm_movehl_ps(f, f)));
                        }
                      });
  for (int t = 0; t < NT; ++t) out[t] = acc[t];
}

void dot_q6_k(int64_t n, const void* w, const void* a, float* out) {
  dot_q6_k_multi<1>(n, w, a, 0, out);
}

// ---- Q8_0 x Q8_0 and Q4_0 x Q8_0 ----------------------------------------------------
// One 32-element block per 256-bit vector (blocks are 34 / 18 bytes, so wider loads would
// need lane inserts), with the per-block float scales of eight blocks computed together.
// Q8_0 x Q8_0. Both the decode kernel and the packed prefill kernel end each group of 16
// blocks with one int32 vector holding the 16 blocks' exact integer dots, lane L belonging
// to block kQ8LaneBlock[L], and one vector of the blocks' scales d_w * d_a; q8_0_steps16 then
// takes the row's float sum through the 16 blocks' steps in block order (block_steps.h), as
// the reference and the rows16 kernels do, and the scalar tail continues it. The integer
// sums are exact whichever way they are formed, so every kernel agrees bitwise with the
// reference (and the rows16 layout) while forming them differently:
//  - decode (one activation row, weights as stored): two blocks per 512-bit vector, one
//    vpdpbusd per pair (on a prepared activation: w ^ 0x80 times a, corrected by
//    -128 * sum(a) per block), then a shuffle tree that sums each block's 8 lanes into one
//    lane;
//  - prefill (packed): weights and activations transposed so that 4-byte column j of all 16
//    blocks forms one vector; 8 vpdpbusd per token and group, with the activation stored as
//    a + 128 (unsigned) and -128 * sum(w) per block as the starting value.
constexpr int kQ8Group = 16;  // blocks per group
// Block of the group held by lane L = 4c + k: c + {0, 8, 4, 12}[k] (what the tree yields).
constexpr int kQ8LaneBlock[16] = {0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15};

// acc after the block steps of a group whose scales and exact sums (as floats) are sc and fi
// in lane order kQ8LaneBlock: one permute each into block order (to_block is the inverse of
// kQ8LaneBlock), then the steps in order.
// Sixteen dependent fmas per group: a one-row kernel waits on them where a core reads faster
// than about 8 bytes a cycle (docs/kernels.md, "One set of float steps").
inline float q8_0_steps16(float acc, __m512 sc, __m512 fi) {
  const __m512i to_block = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
  sc = _mm512_permutexvar_ps(to_block, sc);
  fi = _mm512_permutexvar_ps(to_block, fi);
  acc = q8_0_steps4(acc, _mm512_castps512_ps128(sc), _mm512_castps512_ps128(fi));
  acc = q8_0_steps4(acc, _mm512_extractf32x4_ps(sc, 1), _mm512_extractf32x4_ps(fi, 1));
  acc = q8_0_steps4(acc, _mm512_extractf32x4_ps(sc, 2), _mm512_extractf32x4_ps(fi, 2));
  return q8_0_steps4(acc, _mm512_extractf32x4_ps(sc, 3), _mm512_extractf32x4_ps(fi, 3));
}

// Packed rows: per group, weights = (16) f32 scales | (16) i32 -128 * sum(w) | (8, 16) 4-byte
// columns; activations = (16) f32 scales | (8, 16) 4-byte columns of a + 128. Lane order
// kQ8LaneBlock. The blocks after the last whole group follow unchanged (34 bytes each).
constexpr size_t kQ8PackedW = 64 + 64 + 512;
constexpr size_t kQ8PackedA = 64 + 512;
using Q8PackedRows = Q8Packed<kQ8Group, kQ8PackedW, kQ8PackedA>;

inline __m512i load_block_pair(const BlockQ8_0& lo, const BlockQ8_0& hi) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo.qs))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi.qs)), 1);
}

// (16) f32 scales of a group's blocks (Q8_0 or Q4_0, each starting with its fp16 d) in lane
// order, from the fp16 fields: one gather of the 4 bytes at each lane's block start (d and two
// quants), narrowed to the 16-bit d. Composing them in general registers cost dozens of
// scalar ops per group and capped the decode kernel well below the cache's bandwidth.
template <typename Block>
inline __m512 group_scales(const Block* b) {
  constexpr auto off = [](int lane) {
    return kQ8LaneBlock[lane] * static_cast<int>(sizeof(Block));
  };
  const __m512i offsets =
      _mm512_setr_epi32(off(0), off(1), off(2), off(3), off(4), off(5), off(6), off(7), off(8),
                        off(9), off(10), off(11), off(12), off(13), off(14), off(15));
  const __m512i words = _mm512_i32gather_epi32(offsets, b, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// Decode activation rows are prepared once per matvec (PreparedDot): per group, (16) f32
// scales in lane order, (16) i32 corrections -128 * sum(a) per block in lane order, then the
// 8 block pairs as 64-byte vectors; blocks after the last whole group follow unchanged. The
// prepared kernel then reads the activation with aligned loads, and multiplies the weight
// bytes flipped to unsigned (w ^ 0x80 = w + 128) by a with one vpdpbusd:
// sum((w + 128) * a) - 128 * sum(a) = sum(w * a), exactly. That replaces the sign transfer
// (mask, negate, abs: three ops per 64 bytes) by one xor, which matters because the decode
// loop is bound by the two 512-bit vector ports.
constexpr size_t kQ8PreparedA = 64 + 64 + 512;
using Q8PreparedRows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ8_0), kQ8PreparedA>;

size_t q8_prepared_bytes(int64_t n) {
  return Q8PreparedRows::a_bytes(n);
}

void q8_prepare(int64_t n, const void* act_row, void* dst) {
  Q8PreparedRows::pack(n, act_row, dst, kQ8PreparedA, [](const BlockQ8_0* yg, uint8_t* out) {
    _mm512_storeu_ps(out, group_scales(yg));
    int32_t corr[16];
    for (int l = 0; l < 16; ++l) {
      int32_t sum = 0;
      for (int e = 0; e < kQK0; ++e) sum += yg[kQ8LaneBlock[l]].qs[e];
      corr[l] = -128 * sum;
    }
    std::memcpy(out + 64, corr, sizeof corr);
    for (int p = 0; p < 8; ++p)
      _mm512_storeu_si512(out + 128 + 64 * p, load_block_pair(yg[2 * p], yg[2 * p + 1]));
  });
}

// Sums the 16 blocks' partial dots (v[p]: lanes 0..7 block 2p, 8..15 block 2p + 1) into one
// int32 per block, lane L holding block kQ8LaneBlock[L].
inline __m512i q8_reduce_pairs(const __m512i* v) {
  // 128-bit chunk c of u[q] = block 4q + c (4 partials each).
  __m512i u[4];
  for (int q = 0; q < 4; ++q) {
    u[q] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * q], v[2 * q + 1], 0x88),
                            _mm512_shuffle_i32x4(v[2 * q], v[2 * q + 1], 0xdd));
  }
  // Chunk c of h0: lanes 0-1 block c, 2-3 block 4 + c; of h1: blocks 8 + c, 12 + c.
  const __m512i h0 =
      _mm512_add_epi32(_mm512_unpacklo_epi64(u[0], u[1]), _mm512_unpackhi_epi64(u[0], u[1]));
  const __m512i h1 =
      _mm512_add_epi32(_mm512_unpacklo_epi64(u[2], u[3]), _mm512_unpackhi_epi64(u[2], u[3]));
  const __m512i s0 = _mm512_add_epi32(h0, _mm512_shuffle_epi32(h0, _MM_PERM_CDAB));
  const __m512i s1 = _mm512_add_epi32(h1, _mm512_shuffle_epi32(h1, _MM_PERM_CDAB));
  return _mm512_mask_blend_epi32(0xaaaa, s0, s1);
}

// Rows as stored: a group is its 16 blocks, unchanged.
using Q8Rows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ8_0), kQ8Group * sizeof(BlockQ8_0)>;

// Plain Q8_0 rows (vec_dot without preparation): |w| times a with w's sign moved onto a under
// a byte mask (a is never -128), vpdpbusd.
void dot_q8_0(int64_t n, const void* w, const void* a, float* out) {
  Q8Rows::dot<1>(
      n, w, a, 0, out,
      [](const uint8_t* wg, const uint8_t* ag, float* acc) __attribute__((always_inline)) {
        const auto* xg = reinterpret_cast<const BlockQ8_0*>(wg);
        const auto* yg = reinterpret_cast<const BlockQ8_0*>(ag);
        __m512i v[8];
        for (int p = 0; p < 8; ++p) {
          const __m512i wq = load_block_pair(xg[2 * p], xg[2 * p + 1]);
          const __m512i aq = load_block_pair(yg[2 * p], yg[2 * p + 1]);
          const __m512i as =
              _mm512_mask_sub_epi8(aq, _mm512_movepi8_mask(wq), _mm512_setzero_si512(), aq);
          v[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wq), as);
        }
        const __m512 sc = _mm512_mul_ps(group_scales(xg), group_scales(yg));
        acc[0] = q8_0_steps16(acc[0], sc, _mm512_cvtepi32_ps(q8_reduce_pairs(v)));
      });
}

// The decode kernel on a q8_prepare'd activation row; same integer sums and float steps as
// dot_q8_0, so the same bits. q8_0_prepared_group gives a group's block scales and exact sums
// (as floats) in lane order kQ8LaneBlock, prefetching the weights `ahead` bytes on into L2
// (none for 0).
[[gnu::always_inline]] inline void q8_0_prepared_group(const uint8_t* wg, const uint8_t* pg,
                                                       size_t ahead, __m512* sc, __m512* fi) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  prefetch_l2_at<kQ8Group * sizeof(BlockQ8_0)>(wg, ahead);
  const auto* xg = reinterpret_cast<const BlockQ8_0*>(wg);
  __m512i v[8];
  for (int p = 0; p < 8; ++p) {
    const __m512i wu = _mm512_xor_si512(load_block_pair(xg[2 * p], xg[2 * p + 1]), flip);
    v[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wu, _mm512_loadu_si512(pg + 128 + 64 * p));
  }
  const __m512i isum =
      _mm512_add_epi32(q8_reduce_pairs(v), _mm512_loadu_si512(pg + 64));  // - 128 * sum(a)
  *sc = _mm512_mul_ps(group_scales(xg), _mm512_loadu_ps(pg));
  *fi = _mm512_cvtepi32_ps(isum);
}

template <size_t kL2Ahead>
void dot_q8_0_prepared_rows(int64_t n, const void* w, const void* a, float* out) {
  Q8PreparedRows::dot<1>(
      n, w, a, 0,
      out, [&](const uint8_t* wg, const uint8_t* pg, float* acc) __attribute__((always_inline)) {
        __m512 sc, fi;
        q8_0_prepared_group(wg, pg, kL2Ahead, &sc, &fi);
        acc[0] = q8_0_steps16(acc[0], sc, fi);
      });
}

void dot_q8_0_prepared(int64_t n, const void* w, const void* a, float* out) {
  dot_q8_0_prepared_rows<0>(n, w, a, out);
}

void dot_q8_0_prepared_long(int64_t n, const void* w, const void* a, float* out) {
  dot_q8_0_prepared_rows<kLongRowL2Ahead>(n, w, a, out);
}

// The 16 lanes of four rows' vectors m[r] as t[l] (lane r: m[r]'s lane l).
[[gnu::always_inline]] inline void transpose_rows4(const __m512 (&m)[4], __m128 (&t)[16]) {
  const __m512 a = _mm512_unpacklo_ps(m[0], m[1]);  // chunk k: rows 0, 1 of lanes 4k, 4k + 1
  const __m512 b = _mm512_unpackhi_ps(m[0], m[1]);  // rows 0, 1 of lanes 4k + 2, 4k + 3
  const __m512 c = _mm512_unpacklo_ps(m[2], m[3]);
  const __m512 d = _mm512_unpackhi_ps(m[2], m[3]);
  const __m512 s[4] = {_mm512_shuffle_ps(a, c, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(a, c, _MM_SHUFFLE(3, 2, 3, 2)),
                       _mm512_shuffle_ps(b, d, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm512_shuffle_ps(b, d, _MM_SHUFFLE(3, 2, 3, 2))};
  for (int j = 0; j < 4; ++j) {  // chunk k of s[j]: lane 4k + j of the four rows
    t[j] = _mm512_castps512_ps128(s[j]);
    t[4 + j] = _mm512_extractf32x4_ps(s[j], 1);
    t[8 + j] = _mm512_extractf32x4_ps(s[j], 2);
    t[12 + j] = _mm512_extractf32x4_ps(s[j], 3);
  }
}

// Four rows at once (PreparedDot::dot_rows4): each row's group sums as dot_q8_0_prepared's, and
// its 16 steps in block order taken by one fma for the four rows (lane r: row r's steps,
// q8_0_block_step_f's single rounding), the lanes read in block order instead of permuted.
void dot_q8_0_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  constexpr auto lane_of_block = [] {
    std::array<int, kQ8Group> l{};
    for (int lane = 0; lane < kQ8Group; ++lane) l[kQ8LaneBlock[lane]] = lane;
    return l;
  }();
  Q8PreparedRows::dot_rows4(
      n, w, w_stride, a, out,
      [&](__m128 acc, auto wg, const uint8_t* ag, size_t ahead) __attribute__((always_inline)) {
        __m512 sc[4], fi[4];
        for (int r = 0; r < 4; ++r) q8_0_prepared_group(wg(r), ag, ahead, &sc[r], &fi[r]);
        __m128 ts[16], tf[16];
        transpose_rows4(sc, ts);
        transpose_rows4(fi, tf);
        for (int b = 0; b < kQ8Group; ++b) {
          acc = _mm_fmadd_ps(ts[lane_of_block[b]], tf[lane_of_block[b]], acc);
        }
        return acc;
      },
      q8_rows4_tail);
}

constexpr PreparedDot kQ8PreparedDot{q8_prepared_bytes,      q8_prepare, dot_q8_0_prepared,
                                     dot_q8_0_prepared_long, nullptr,    dot_q8_0_prepared_rows4};

// Byte offsets (from the group's first block) of 4-byte column 0 of each lane's block.
inline __m512i q8_gather_offsets() {
  alignas(64) int32_t off[16];
  for (int l = 0; l < 16; ++l) off[l] = kQ8LaneBlock[l] * static_cast<int>(sizeof(BlockQ8_0)) + 2;
  return _mm512_load_si512(off);
}

// Transposes one group into 8 column vectors at dst (64 bytes each); returns nothing.
template <bool kOffset>
inline void q8_pack_columns(const BlockQ8_0* g, uint8_t* dst, __m512i* corr) {
  const __m512i off = q8_gather_offsets();
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i sum = _mm512_setzero_si512();
  for (int j = 0; j < 8; ++j) {
    __m512i col = _mm512_i32gather_epi32(_mm512_add_epi32(off, _mm512_set1_epi32(4 * j)), g, 1);
    if (kOffset) {
      col = _mm512_xor_si512(col, flip);  // a + 128 as unsigned bytes
    } else {
      sum = _mm512_dpbusd_epi32(sum, flip, col);  // 128 * sum(w) per lane's block
    }
    _mm512_storeu_si512(dst + 64 * j, col);
  }
  if (corr != nullptr) *corr = _mm512_sub_epi32(_mm512_setzero_si512(), sum);
}

void q8_pack_w(int64_t n, const void* w_row, void* dst) {
  Q8PackedRows::pack(n, w_row, dst, kQ8PackedW, [](const BlockQ8_0* xg, uint8_t* out) {
    __m512i corr;
    q8_pack_columns<false>(xg, out + 128, &corr);
    _mm512_storeu_ps(out, group_scales(xg));
    _mm512_storeu_si512(out + 64, corr);
  });
}

void q8_pack_a(int64_t n, const void* act_row, void* dst) {
  Q8PackedRows::pack(n, act_row, dst, kQ8PackedA, [](const BlockQ8_0* yg, uint8_t* out) {
    q8_pack_columns<true>(yg, out + 64, nullptr);
    _mm512_storeu_ps(out, group_scales(yg));
  });
}

// Four tokens per call: the weight group (scales, offsets, 8 columns) is loaded once and
// each token costs 8 activation loads, 8 vpdpbusd, one scale multiply, a convert and an fma.
void q8_packed_dot_x4(int64_t n, const void* packed_w, const void* packed_a, size_t a_stride,
                      float* out) {
  constexpr int NT = 4;
  Q8PackedRows::dot<NT>(
      n, packed_w, packed_a, a_stride,
      out, [&](const uint8_t* wg, const uint8_t* ag0, float* acc) __attribute__((always_inline)) {
        const __m512 wd = _mm512_loadu_ps(wg);
        const __m512i corr = _mm512_loadu_si512(wg + 64);
        __m512i wc[8];
        for (int j = 0; j < 8; ++j) wc[j] = _mm512_loadu_si512(wg + 128 + 64 * j);
        for (int t = 0; t < NT; ++t) {
          const uint8_t* ag = ag0 + t * a_stride;
          __m512i isum = corr;
          for (int j = 0; j < 8; ++j)
            isum = _mm512_dpbusd_epi32(isum, _mm512_loadu_si512(ag + 64 + 64 * j), wc[j]);
          const __m512 sc = _mm512_mul_ps(wd, _mm512_loadu_ps(ag));
          acc[t] = q8_0_steps16(acc[t], sc, _mm512_cvtepi32_ps(isum));
        }
      });
}

constexpr PackedDot kQ8PackedDot{Q8PackedRows::w_bytes, Q8PackedRows::a_bytes, q8_pack_w, q8_pack_a,
                                 q8_packed_dot_x4};

// ---- Q4_0 x Q8_0 ---------------------------------------------------------------------
// Q4_0 goes by groups of 16 blocks (288 bytes of weights), as Q8_0 does: the group's exact
// block sums in 16 lanes, the -8 offset as -8 * sum(a) per block, one lane-wise scale multiply
// and Q4_0's quad steps over the group (q4_0_steps16); the blocks after the last whole group
// continue the quads in scalar code. On a plain activation row (vec_dot) one 64-byte vector
// per block pair holds both blocks' 32 quants in element order (the 16 quant bytes broadcast
// to two 128-bit lanes, the second lane shifted down a nibble) against the pair's activation,
// reduced by q8_reduce_pairs. The prepared kernels (matvec, GGUF-layout prefill) go by quads
// instead, against an activation laid out for them (q4_prepare): each quad's four quant
// fields in one vector, two vpdpbusd, and a reduction of three steps for the four quads, less
// than half of q8_reduce_pairs's work; in a throwaway harness (one core, weights in L2) that
// was clearly faster per group.
// Blocks lo, hi as 64 quants 0..15 in element order: lanes qs(lo) & 15, qs(lo) >> 4,
// qs(hi) & 15, qs(hi) >> 4.
inline __m512i q4_block_pair(const BlockQ4_0& lo, const BlockQ4_0& hi) {
  const __m512i both = _mm512_mask_broadcast_i32x4(
      _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo.qs))), 0xff00,
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi.qs)));
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  return _mm512_and_si512(_mm512_srlv_epi64(both, shifts), _mm512_set1_epi8(0x0f));
}

// The prepared kernels' lane order: 128-bit chunk k holds block k of quads 0, 1, 2, 3, so
// lane 4k + i holds block 4i + k (what one vpdpbusd per quad and a three-step reduction of
// the four quads' vectors yield, below).
constexpr int kQ4QuadLaneBlock[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

// (16) f32 scales of a Q4_0 group's blocks, lane l holding block Order[l]'s, from word
// permutes of the group's 288 bytes instead of a gather: block b's d is word 9b, so blocks
// 0-7 sit in the first 128 bytes, 8-14 in the next 128 and block 15 in the last 32 (read
// with a 32-byte load: nothing past the group is touched). The gather was the costliest step
// of a Q4_0 group, whose 288 bytes carry half the quants per scale of Q8_0's 544; with the
// permutes the GGUF-layout matvec reads clearly faster (docs/kernels.md, "GGUF-layout
// streaming").
template <const int (&Order)[16]>
inline __m512 q4_group_scales(const BlockQ4_0* g) {
  constexpr auto word = [](int lane) {
    const int b = Order[lane];
    return static_cast<int16_t>(b < 8 ? 9 * b : b < 15 ? 9 * b - 64 : 9 * b - 128);
  };
  constexpr auto mask_of = [](int lo, int hi) {
    uint32_t m = 0;
    for (int l = 0; l < 16; ++l) {
      if (Order[l] >= lo && Order[l] < hi) m |= 1u << l;
    }
    return m;
  };
  const __m512i idx =
      _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, word(15), word(14), word(13),
                       word(12), word(11), word(10), word(9), word(8), word(7), word(6), word(5),
                       word(4), word(3), word(2), word(1), word(0));
  const auto* p = reinterpret_cast<const uint8_t*>(g);
  const __m512i first =
      _mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
  const __m512i second =
      _mm512_permutex2var_epi16(_mm512_loadu_si512(p + 128), idx, _mm512_loadu_si512(p + 192));
  const __m512i last = _mm512_permutexvar_epi16(
      idx, _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 256))));
  __m512i d = _mm512_mask_blend_epi16(mask_of(8, 15), first, second);
  d = _mm512_mask_blend_epi16(mask_of(15, 16), d, last);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(d));
}

// Lane `lane` (0..3) of v.
template <int lane>
inline float lane_of(__m128 v) {
  if constexpr (lane == 0) return _mm_cvtss_f32(v);
  if constexpr (lane == 1) return _mm_cvtss_f32(_mm_movehdup_ps(v));
  if constexpr (lane == 2) return _mm_cvtss_f32(_mm_movehl_ps(v, v));
  if constexpr (lane == 3) return _mm_cvtss_f32(_mm_shuffle_ps(v, v, 3));
}

// The four quads' sums of a group of 16 blocks, Q4_0's quad steps (block_steps.h) before the
// row's sum adds them, whose scales and exact sums (as floats) are sc and fi, lane l holding
// block Order[l]'s, where 128-bit chunk k holds block k of each quad (kQ8LaneBlock: quads 0,
// 2, 1, 3; kQ4QuadLaneBlock: 0, 1, 2, 3): four fmas build them side by side; lane
// q4_quad_lane<Order>(i) of the result holds quad i's.
template <const int (&Order)[16]>
inline __m128 q4_0_quads16(__m512 sc, __m512 fi) {
  // Chunk k of q after step k holds the quads' sums so far; each shuffle moves it up a chunk.
  __m512 q = _mm512_fmadd_ps(sc, fi, _mm512_setzero_ps());
  q = _mm512_fmadd_ps(sc, fi, _mm512_shuffle_f32x4(q, q, 0x00));
  q = _mm512_fmadd_ps(sc, fi, _mm512_shuffle_f32x4(q, q, 0x55));
  q = _mm512_fmadd_ps(sc, fi, _mm512_shuffle_f32x4(q, q, 0xaa));
  return _mm512_extractf32x4_ps(q, 3);
}

// Chunk 3's lane holding quad i's last block, so its sum in the end (q4_0_quads16).
template <const int (&Order)[16]>
constexpr int q4_quad_lane(int quad) {
  for (int l = 0; l < 4; ++l) {
    if (Order[12 + l] == 4 * quad + 3) return l;
  }
  return -1;
}

// acc after Q4_0's quad steps over a group (q4_0_quads16), the quads added in order.
template <const int (&Order)[16]>
inline float q4_0_steps16(float acc, __m512 sc, __m512 fi) {
  const __m128 q3 = q4_0_quads16<Order>(sc, fi);
  acc = q4_0_quad_end(acc, lane_of<q4_quad_lane<Order>(0)>(q3));
  acc = q4_0_quad_end(acc, lane_of<q4_quad_lane<Order>(1)>(q3));
  acc = q4_0_quad_end(acc, lane_of<q4_quad_lane<Order>(2)>(q3));
  return q4_0_quad_end(acc, lane_of<q4_quad_lane<Order>(3)>(q3));
}

// Plain Q8_0 activation blocks (vec_dot): per block pair one vpdpbusd, the -8 offset from a
// second vpdpbusd against 8s, q8_reduce_pairs to lane order kQ8LaneBlock.
void dot_q4_0(int64_t n, const void* w, const void* a, float* out) {
  const __m512i eight = _mm512_set1_epi8(8);
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int64_t nb = n / kQK0, ng = nb / kQ8Group;
  float acc = 0;
  for (int64_t g = 0; g < ng; ++g) {
    const BlockQ4_0* xg = x + g * kQ8Group;
    const BlockQ8_0* yg = y + g * kQ8Group;
    __m512i v[8], s[8];
    for (int p = 0; p < 8; ++p) {
      const __m512i aq = load_block_pair(yg[2 * p], yg[2 * p + 1]);
      v[p] =
          _mm512_dpbusd_epi32(_mm512_setzero_si512(), q4_block_pair(xg[2 * p], xg[2 * p + 1]), aq);
      s[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, aq);
    }
    const __m512i isum = _mm512_sub_epi32(q8_reduce_pairs(v), q8_reduce_pairs(s));
    acc = q4_0_steps16<kQ8LaneBlock>(
        acc, _mm512_mul_ps(q4_group_scales<kQ8LaneBlock>(xg), group_scales(yg)),
        _mm512_cvtepi32_ps(isum));
  }
  *out = q4_tail(acc, x + ng * kQ8Group, y + ng * kQ8Group, nb - ng * kQ8Group);
}

// Decode activation rows prepared for Q4_0 (PreparedDot), per group of 16 blocks: (16) f32
// scales and (16) i32 offsets -8 * sum(a) in lane order kQ4QuadLaneBlock, then per quad q two
// 64-byte vectors: elements 0-15 of blocks 4q .. 4q + 3, then elements 16-31. A quad's four
// 16-byte quant fields, loaded into one vector, then give both with one mask (low nibbles) and
// one shift and mask (high), and two vpdpbusd leave 128-bit lane k holding block 4q + k's
// sum in four parts. Blocks after the last whole group follow unchanged. The sizes are Q8_0's
// prepared ones (q8_prepared_bytes).
constexpr size_t kQ4PreparedA = kQ8PreparedA;

void q4_prepare(int64_t n, const void* act_row, void* dst) {
  Q8PreparedRows::pack(n, act_row, dst, kQ4PreparedA, [](const BlockQ8_0* yg, uint8_t* out) {
    float scales[16];
    int32_t offsets[16];
    for (int l = 0; l < 16; ++l) {
      const BlockQ8_0& y = yg[kQ4QuadLaneBlock[l]];
      scales[l] = h2f(y.d);
      int32_t sum = 0;
      for (int e = 0; e < kQK0; ++e) sum += y.qs[e];
      offsets[l] = -8 * sum;
    }
    std::memcpy(out, scales, sizeof scales);
    std::memcpy(out + 64, offsets, sizeof offsets);
    for (int q = 0; q < 4; ++q) {
      for (int k = 0; k < 4; ++k) {
        std::memcpy(out + 128 + 128 * q + 16 * k, yg[4 * q + k].qs, 16);
        std::memcpy(out + 128 + 128 * q + 64 + 16 * k, yg[4 * q + k].qs + 16, 16);
      }
    }
  });
}

// Quad q of a group (blocks 4q .. 4q + 3) as 64 quants 0..15 in each of lo (elements 0-15 of
// each block, one block per 128-bit lane) and hi (elements 16-31).
inline void q4_quad(const BlockQ4_0* quad, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[0].qs)));
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[1].qs)), 1);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[2].qs)), 2);
  v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(quad[3].qs)), 3);
  *lo = _mm512_and_si512(v, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
}

// The group's 16 exact block sums in lane order kQ4QuadLaneBlock, from its quads' quants
// (lo, hi per quad) against prepared group pg.
inline __m512i q4_quad_sums(const __m512i (&lo)[4], const __m512i (&hi)[4], const uint8_t* pg) {
  __m512i s[4];
  for (int q = 0; q < 4; ++q) {
    s[q] = _mm512_dpbusd_epi32(dpbusd_from_zero(lo[q], _mm512_loadu_si512(pg + 128 + 128 * q)),
                               hi[q], _mm512_loadu_si512(pg + 128 + 128 * q + 64));
  }
  // Chunk k of s[q]: block 4q + k in four parts; summed so that lane 4k + q holds it whole.
  const __m512i s01 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
  const __m512i s23 =
      _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
  const __m512i sums =
      _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
  return _mm512_add_epi32(sums, _mm512_loadu_si512(pg + 64));  // the -8 offset
}

// Group g's scales and exact sums (as floats) in lane order kQ4QuadLaneBlock, prefetching the
// weights `ahead` bytes on into L2 (none for 0).
[[gnu::always_inline]] inline void q4_0_prepared_group(const BlockQ4_0* xg, const uint8_t* pg,
                                                       size_t ahead, __m512* sc, __m512* fi) {
  prefetch_l2_at<kQ8Group * sizeof(BlockQ4_0)>(xg, ahead);
  __m512i lo[4], hi[4];
  for (int q = 0; q < 4; ++q) q4_quad(xg + 4 * q, &lo[q], &hi[q]);
  *sc = _mm512_mul_ps(q4_group_scales<kQ4QuadLaneBlock>(xg), _mm512_loadu_ps(pg));
  *fi = _mm512_cvtepi32_ps(q4_quad_sums(lo, hi, pg));
}

template <size_t kL2Ahead>
void dot_q4_0_prepared_rows(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* pa = static_cast<const uint8_t*>(a);
  const int64_t nb = n / kQK0, ng = nb / kQ8Group;
  float acc = 0;
  for (int64_t g = 0; g < ng; ++g) {
    __m512 sc, fi;
    q4_0_prepared_group(x + g * kQ8Group, pa + static_cast<size_t>(g) * kQ4PreparedA, kL2Ahead, &sc,
                        &fi);
    acc = q4_0_steps16<kQ4QuadLaneBlock>(acc, sc, fi);
  }
  const auto* yt = reinterpret_cast<const BlockQ8_0*>(pa + static_cast<size_t>(ng) * kQ4PreparedA);
  *out = q4_tail(acc, x + ng * kQ8Group, yt, nb - ng * kQ8Group);
}

void dot_q4_0_prepared(int64_t n, const void* w, const void* a, float* out) {
  dot_q4_0_prepared_rows<0>(n, w, a, out);
}

void dot_q4_0_prepared_long(int64_t n, const void* w, const void* a, float* out) {
  dot_q4_0_prepared_rows<kLongRowL2Ahead>(n, w, a, out);
}

// Four rows at once (PreparedDot::dot_rows4): each row's quad sums as dot_q4_0_prepared's,
// transposed so that one add takes quad i of the four rows (lane r: row r's add).
void dot_q4_0_prepared_rows4(int64_t n, const void* w, size_t w_stride, const void* a, float* out) {
  using Q4PreparedRows = Q8Packed<kQ8Group, kQ8Group * sizeof(BlockQ4_0), kQ4PreparedA>;
  Q4PreparedRows::dot_rows4(
      n, w, w_stride, a, out,
      [](__m128 acc, auto wg, const uint8_t* ag, size_t ahead) __attribute__((always_inline)) {
        __m128 q[4];
        for (int r = 0; r < 4; ++r) {
          __m512 sc, fi;
          q4_0_prepared_group(reinterpret_cast<const BlockQ4_0*>(wg(r)), ag, ahead, &sc, &fi);
          q[r] = q4_0_quads16<kQ4QuadLaneBlock>(sc, fi);
        }
        _MM_TRANSPOSE4_PS(q[0], q[1], q[2], q[3]);  // q[l], lane r: row r's lane l
        for (int i = 0; i < 4; ++i) acc = _mm_add_ps(acc, q[q4_quad_lane<kQ4QuadLaneBlock>(i)]);
        return acc;
      },
      q4_rows4_tail);
}

// Four prepared activation rows (a_stride bytes apart) at once, for GGUF-layout prefill: each
// group's quants are decoded once for the four tokens; per token the same integer sums, scale
// steps and tail as dot_q4_0_prepared, so its bits.
void dot_q4_0_prepared_x4(int64_t n, const void* w, const void* a, size_t a_stride, float* out) {
  constexpr int kNT = 4;
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* pa = static_cast<const uint8_t*>(a);
  const int64_t nb = n / kQK0, ng = nb / kQ8Group;
  float acc[kNT] = {};
  for (int64_t g = 0; g < ng; ++g) {
    const BlockQ4_0* xg = x + g * kQ8Group;
    __m512i lo[4], hi[4];
    for (int q = 0; q < 4; ++q) q4_quad(xg + 4 * q, &lo[q], &hi[q]);
    const __m512 dw = q4_group_scales<kQ4QuadLaneBlock>(xg);
    for (int t = 0; t < kNT; ++t) {
      const uint8_t* pg = pa + t * a_stride + static_cast<size_t>(g) * kQ4PreparedA;
      acc[t] = q4_0_steps16<kQ4QuadLaneBlock>(acc[t], _mm512_mul_ps(dw, _mm512_loadu_ps(pg)),
                                              _mm512_cvtepi32_ps(q4_quad_sums(lo, hi, pg)));
    }
  }
  for (int t = 0; t < kNT; ++t) {
    const auto* yt = reinterpret_cast<const BlockQ8_0*>(pa + t * a_stride +
                                                        static_cast<size_t>(ng) * kQ4PreparedA);
    out[t] = q4_tail(acc[t], x + ng * kQ8Group, yt, nb - ng * kQ8Group);
  }
}

constexpr PreparedDot kQ4PreparedDot{q8_prepared_bytes,    q4_prepare,
                                     dot_q4_0_prepared,    dot_q4_0_prepared_long,
                                     dot_q4_0_prepared_x4, dot_q4_0_prepared_rows4};

}  // namespace

VecDotX4Fn avx512_vec_dot_x4(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ4_K:
      return dot_q4_k_multi<4>;
    case gguf::TensorType::kQ5_K:
      return dot_q5_k_multi<4>;
    case gguf::TensorType::kQ6_K:
      return dot_q6_k_multi<4>;
    default:
      return nullptr;
  }
}

const PackedDot* avx512_packed_dot(gguf::TensorType type) {
  return type == gguf::TensorType::kQ8_0 ? &kQ8PackedDot : nullptr;
}

const PreparedDot* avx512_prepared_dot(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ8_0:
      return &kQ8PreparedDot;
    case gguf::TensorType::kQ4_0:
      return &kQ4PreparedDot;
    case gguf::TensorType::kQ6_K:
      return avx512_q6_k_prepared_dot();  // q6_k_decode_avx512.cpp
    default:
      return avx512_k_prepared_dot(type);  // Q4_K, Q5_K (k_quants_decode_avx512.cpp)
  }
}

VecDotFn avx512_vec_dot(gguf::TensorType type) {
  constexpr VecDots kDots{dot_q4_k, dot_q5_k, dot_q6_k, dot_q8_0,
                          dot_q4_0, dot_f32,  dot_f16,  dot_bf16};
  return kDots.find(type);
}

}  // namespace hearth::quant
