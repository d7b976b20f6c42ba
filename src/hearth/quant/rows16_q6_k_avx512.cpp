// Q6_K row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane. Per 16-element group,
// three 64-byte loads hold the group's quants for 16 rows (three 4-element sets whole in the
// low 6 bits, the fourth set in the top bits of all three; layout in rows16_kernels.h): 9
// vector ops rebuild the four sets as bytes, then one vpdpbusd each against the broadcast
// activation quants, starting from the group's -32 * sum(a)
// correction. The int8 group scale applies lane-wise. Same integer sums and float steps per
// lane as the scalar reference (rows16_q6_k.cpp).
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// kAhead: one prefetch per line consumed, this many bytes ahead, tied beside the loads
// (rows16_prefetch_beside).
template <int kAhead>
struct Q6_KAvx512 {
  // 8 tokens per pass over the weights (rows16_max_tokens): the kernel alone ran faster with
  // 8 than with 4 in a throwaway probe; the whole matmul moved within the host's noise
  // (docs/kernels.md, "Tokens per pass").
  static constexpr int kMaxTokens = 8;

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
      __m512i q[4];
      decode(v0, v1, v2, q);
      const __m512i sc = scales(g, grp);
      for (int t = 0; t < NT; ++t) {
        const uint8_t* aq = ab[t] + 80 + 16 * grp;
        __m512i x = _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * grp));
        for (int k = 0; k < 4; ++k)
          x = _mm512_dpbusd_epi32(x, q[k], _mm512_set1_epi32(rows16_load_i32(aq + 4 * k)));
        s[t] = _mm512_add_epi32(s[t], _mm512_mullo_epi32(sc, x));
      }
    }
    finish<NT>(g, ab, s, acc);
  }

  // The four 4-element sets of a 16-element group from its three vectors
  // (rows16_q6_k_decode).
  [[gnu::always_inline]] static void decode(__m512i v0, __m512i v1, __m512i v2, __m512i (&q)[4]) {
    rows16_q6_k_decode(v0, v1, v2, q);
  }

  // The 16 rows' int8 scales of group grp.
  [[gnu::always_inline]] static __m512i scales(const uint8_t* g, int grp) {
    return _mm512_cvtepi8_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + 32 + 16 * grp)));
  }

  template <int NT>
  [[gnu::always_inline]] static void finish(const uint8_t* g, Rows16Acts<NT> ab,
                                            const __m512i (&s)[NT], Rows16Acc<NT>& acc) {
    const __m512 dw = Rows16Lanes::f16(g, 0);
    for (int t = 0; t < NT; ++t) {
      acc[t][0] = Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), s[t], acc[t][0]);
    }
  }

  // Two groups, 4 tokens a pass: one chain per group and token, each activation broadcast
  // feeding both groups. Each group's sums and float steps are block's, so its bits are dot's.
  static constexpr int kPairTokens = 4;
  template <int NT>
  [[gnu::always_inline]] void block_pair(const uint8_t* g0, const uint8_t* g1, Rows16Acts<NT> ab,
                                         Rows16Acc<NT>& acc0, Rows16Acc<NT>& acc1) const {
    __m512i s0[NT]{}, s1[NT]{};
    for (int grp = 0; grp < 16; ++grp) {
      const uint8_t* va = g0 + 288 + 192 * grp;
      const uint8_t* vb = g1 + 288 + 192 * grp;
      __m512i a0 = _mm512_loadu_si512(va), a1 = _mm512_loadu_si512(va + 64);
      __m512i a2 = _mm512_loadu_si512(va + 128), b0 = _mm512_loadu_si512(vb);
      __m512i b1 = _mm512_loadu_si512(vb + 64), b2 = _mm512_loadu_si512(vb + 128);
      // One load each: GCC would otherwise fold each load into both of its uses.
      asm("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(b0), "+v"(b1), "+v"(b2));
      __m512i qa[4], qb[4];
      decode(a0, a1, a2, qa);
      decode(b0, b1, b2, qb);
      __m512i xa[NT], xb[NT];
      for (int t = 0; t < NT; ++t) {
        xa[t] = xb[t] = _mm512_set1_epi32(rows16_load_i32(ab[t] + 16 + 4 * grp));
      }
      for (int k = 0; k < 4; ++k) {
        for (int t = 0; t < NT; ++t) {
          const __m512i a = _mm512_set1_epi32(rows16_load_i32(ab[t] + 80 + 16 * grp + 4 * k));
          xa[t] = _mm512_dpbusd_epi32(xa[t], qa[k], a);
          xb[t] = _mm512_dpbusd_epi32(xb[t], qb[k], a);
        }
      }
      const __m512i sca = scales(g0, grp), scb = scales(g1, grp);
      for (int t = 0; t < NT; ++t) {
        rows16_add_in_place(s0[t], _mm512_mullo_epi32(sca, xa[t]));
        rows16_add_in_place(s1[t], _mm512_mullo_epi32(scb, xb[t]));
      }
    }
    finish<NT>(g0, ab, s0, acc0);
    finish<NT>(g1, ab, s1, acc1);
  }
};

// Prefetch distances per CPU (stream_tuning.h): Zen 4 2 KiB (1.5 and 3 KiB within noise of
// it, 4 KiB slower), Zen 5 6 KiB.
template <int kAhead>
using Q6_KKernel = Rows16Blocks<Q6_KAvx512<kAhead>, Rows16Q6_K>;

// Rows16::repack, AVX-512: per row, the 256 quants unpacked one per byte (as the GGUF-layout
// kernel does), each group's four-byte sets gathered into lanes (lane g: group g) and the top
// two bits of set 3 merged into sets 0-2; then rows16_transpose turns the 16 rows' vectors
// into the layout's. The same bytes as the scalar pack_block (rows16_q6_k.cpp).
void repack_q6_k(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
  const __m512i top2 = _mm512_set1_epi8(static_cast<char>(0xc0));
  const __m512i shl_lo = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);  // quarters 0, 1 of a half
  const __m512i shr_hi = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);  // quarters 2, 3
  // Lane g: dword 4 (g % 8) + k of two vectors.
  const __m512i every_4th =
      _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  __m512i set_idx[4];
  for (int k = 0; k < 4; ++k) set_idx[k] = _mm512_add_epi32(every_4th, _mm512_set1_epi32(k));
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / kQKK; ++i, g += Rows16Q6_K::kBlockBytes) {
    __m512i vec[3][16];  // [k][row]: lane j of row r's vector = the bytes at 288 + 192j + 64k + 4r
    __m128i scales[16];  // row r's 16 group scales
    for (int r = 0; r < kRows16; ++r) {
      const BlockQ6_K& b = rows16_row<BlockQ6_K>(src, r, src_row_bytes)[i];
      std::memcpy(g + 2 * r, &b.d, 2);
      scales[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
      __m512i q[4];  // elements 64m .. 64m + 63, one per byte
      for (int h = 0; h < 2; ++h) {
        const __m512i ql = _mm512_loadu_si512(b.ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
        q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                   _mm512_and_si512(_mm512_sllv_epi64(qh, shl_lo), m30));
        q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi64(qh, shr_hi), m30));
      }
      // Set k of group j is dword 4j + k: groups 0-7 in q[0], q[1], groups 8-15 in q[2], q[3].
      __m512i set[4];
      for (int k = 0; k < 4; ++k) {
        set[k] = _mm512_mask_blend_epi32(0xff00, _mm512_permutex2var_epi32(q[0], set_idx[k], q[1]),
                                         _mm512_permutex2var_epi32(q[2], set_idx[k], q[3]));
      }
      // set 3's bits 2k, 2k + 1 of each byte to bits 6, 7 of set k's byte (masked: the 32-bit
      // shift moves bits into the neighbour byte's low bits).
      vec[0][r] = _mm512_ternarylogic_epi32(set[0], _mm512_slli_epi32(set[3], 6), top2, 0xf8);
      vec[1][r] = _mm512_ternarylogic_epi32(set[1], _mm512_slli_epi32(set[3], 4), top2, 0xf8);
      vec[2][r] = _mm512_ternarylogic_epi32(set[2], _mm512_slli_epi32(set[3], 2), top2, 0xf8);
    }
    __m128i by_group[16];  // group j's scale of the 16 rows, at 32 + 16j
    rows16_transpose_bytes(scales, by_group);
    for (int j = 0; j < 16; ++j) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 32 + 16 * j), by_group[j]);
    }
    for (int k = 0; k < 3; ++k) {
      __m512i out[16];
      rows16_transpose(vec[k], out);
      for (int j = 0; j < 16; ++j) _mm512_storeu_si512(g + 288 + 192 * j + 64 * k, out[j]);
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q6_k_repack_avx512 = repack_q6_k;
Rows16DotKernel* const rows16_q6_k_dot_avx512 =
    rows16_dot_tuned<Q6_KKernel<2048>, Q6_KKernel<6144>>;
Rows16PairKernel* const rows16_q6_k_dot_pair_avx512 =
    rows16_dot_pair<Rows16PairBlocks<Q6_KAvx512<0>, Rows16Q6_K>>;

}  // namespace hearth::quant
