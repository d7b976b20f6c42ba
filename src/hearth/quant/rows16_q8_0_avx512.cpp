// Q8_0 row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane, so a block column of
// 16 rows is 8 vpdpbusd (4 quants of every row against the broadcast 4 activation quants)
// and one lane-wise scale and fma; no horizontal work per block. Same integer sums and float
// steps per lane as the scalar reference (rows16_q8_0.cpp), so the same bits.
#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
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
      __m512i s0 = rows16_q8_0_corr(ab[t]);
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
    __m512i s0[NT], s1[NT];  // one chain per group and token, from the correction
    for (int t = 0; t < NT; ++t) s0[t] = s1[t] = rows16_q8_0_corr(ab[t]);
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

// Rows16::repack, AVX-512: two block columns at a time. Each row's quants of blocks b and
// b + 1 (8 dwords each) go into the lanes of a vector, rows16_transpose turns 16 rows' vectors
// into the two columns' slices, flipped to unsigned on the way out; the scales go as the
// scalar pack writes them. The same bytes as the scalar repack.
void repack_q8_0(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  using L = Rows16Q8_0;
  auto* g = static_cast<uint8_t*>(group);
  const int64_t nb = cols / kQK0;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < nb; b += 2) {
    const bool two = b + 1 < nb;
    uint8_t* gb = g + b * L::kBlockBytes;
    __m512i v[16];
    for (int r = 0; r < kRows16; ++r) {
      const BlockQ8_0* row = rows16_row<BlockQ8_0>(src, r, src_row_bytes);
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs));
      const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b + 1].qs))
                             : _mm256_setzero_si256();
      v[r] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      std::memcpy(gb + 2 * r, &row[b].d, 2);
      if (two) std::memcpy(gb + L::kBlockBytes + 2 * r, &row[b + 1].d, 2);
    }
    __m512i out[16];
    rows16_transpose(v, out);
    for (int m = 0; m < (two ? 16 : 8); ++m) {
      _mm512_storeu_si512(gb + (m / 8) * L::kBlockBytes + 32 + 64 * (m % 8),
                          _mm512_xor_si512(out[m], flip));
    }
  }
}

}  // namespace

Rows16RepackKernel* const rows16_q8_0_repack_avx512 = repack_q8_0;
Rows16DotKernel* const rows16_q8_0_dot_avx512 = rows16_dot<Rows16Blocks<Q8_0Avx512, Rows16Q8_0>>;
Rows16PairKernel* const rows16_q8_0_dot_pair_avx512 =
    rows16_dot_pair<Rows16PairBlocks<Q8_0Avx512, Rows16Q8_0>>;

}  // namespace hearth::quant
