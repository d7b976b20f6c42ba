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
};

}  // namespace

Rows16DotKernel* const rows16_q8_0_dot_avx512 = rows16_dot<Rows16Blocks<Q8_0Avx512, Rows16Q8_0>>;

}  // namespace hearth::quant
