// Q8_0 row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane, so a block column of
// 16 rows is 8 vpdpbusd (4 quants of every row against the broadcast 4 activation quants)
// and one lane-wise scale and fma; no horizontal work per block. Same integer sums and float
// steps per lane as the scalar reference (rows16_q8_0.cpp), so the same bits.
#include "hearth/quant/rows16_kernels.h"
#include "hearth/quant/rows16_x86.h"

namespace hearth::quant {
namespace {

// One prefetch per line consumed, this far ahead, tied beside the loads
// (rows16_prefetch_beside): the hardware prefetcher alone leaves DRAM latency exposed.
constexpr int kPrefetchBytes = 4096;

struct Q8_0Avx512 {
  // 8 tokens per pass over the weights (rows16_max_tokens): side by side against 4, the
  // matmul in `hearth bench kernels` gained (docs/kernels.md, "Tokens per pass").
  static constexpr int kMaxTokens = 8;
  template <int NT>
  [[gnu::always_inline]] void block(const uint8_t* g, Rows16Acts<NT> ab, Rows16Acc<NT>& acc) const {
    // A block column is 544 bytes (8.5 lines): 9 prefetches cover it.
    __m512i wq[8];
    for (int s = 0; s < 8; ++s) {
      wq[s] = _mm512_loadu_si512(g + 32 + 64 * s);
      rows16_prefetch_beside(wq[s], g + kPrefetchBytes + 64 * s);
      rows16_store_beside<NT>(wq[s]);
    }
    rows16_prefetch_beside(wq[7], g + kPrefetchBytes + 512);
    const __m512 dw = Rows16Lanes::f16(g, 0);
    for (int t = 0; t < NT; ++t) {
      const uint8_t* aq = ab[t] + 8;  // (8) 4-byte groups of activation quants
      // Two chains so the vpdpbusd latency overlaps; integer sums are exact in any order.
      __m512i s0 = _mm512_set1_epi32(rows16_load_i32(ab[t] + 4));
      __m512i s1 = _mm512_setzero_si512();
      for (int s = 0; s < 8; s += 2) {
        s0 = _mm512_dpbusd_epi32(s0, wq[s], _mm512_set1_epi32(rows16_load_i32(aq + 4 * s)));
        s1 = _mm512_dpbusd_epi32(s1, wq[s + 1], _mm512_set1_epi32(rows16_load_i32(aq + 4 * s + 4)));
      }
      acc[t][0] =
          Rows16Lanes::fma_scaled(dw, rows16_load_f32(ab[t]), _mm512_add_epi32(s0, s1), acc[t][0]);
    }
  }

  // Two groups, 4 tokens a pass: 8 vpdpbusd chains, one per group and token, in registers
  // beside the two groups' weight vectors and 8 float sums.
  static constexpr int kPairTokens = 4;
  template <int NT>
  [[gnu::always_inline]] void block_pair(const uint8_t* g0, const uint8_t* g1, Rows16Acts<NT> ab,
                                         Rows16Acc<NT>& acc0, Rows16Acc<NT>& acc1) const {
    __m512i s0[NT]{}, s1[NT]{};  // one chain per group and token
    for (int s = 0; s < 8; ++s) {
      const __m512i w0 = _mm512_loadu_si512(g0 + 32 + 64 * s);
      const __m512i w1 = _mm512_loadu_si512(g1 + 32 + 64 * s);
      for (int t = 0; t < NT; ++t) {
        const __m512i a = _mm512_set1_epi32(rows16_load_i32(ab[t] + 8 + 4 * s));
        s0[t] = _mm512_dpbusd_epi32(s0[t], w0, a);
        s1[t] = _mm512_dpbusd_epi32(s1[t], w1, a);
      }
    }
    rows16_q8_0_pair_scale<NT>(g0, g1, ab, s0, s1, acc0, acc1);
  }
};

}  // namespace

Rows16DotKernel* const rows16_q8_0_dot_avx512 = rows16_dot<Rows16Blocks<Q8_0Avx512, Rows16Q8_0>>;
Rows16PairKernel* const rows16_q8_0_dot_pair_avx512 =
    rows16_dot_pair<Rows16PairBlocks<Q8_0Avx512, Rows16Q8_0>>;

}  // namespace hearth::quant
