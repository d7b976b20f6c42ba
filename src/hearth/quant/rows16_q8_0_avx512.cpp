// Q8_0 row-interleaved kernel, AVX-512 VNNI: one row per 32-bit lane, so a block column of
// 16 rows is 8 vpdpbusd (4 quants of every row against the broadcast 4 activation quants)
// and one lane-wise scale and fma; no horizontal work per block. Same integer sums and float
// steps per lane as the scalar reference (rows16_q8_0.cpp), so the same bits.
#include <immintrin.h>

#include <cstring>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/rows16_common.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {
namespace {

constexpr size_t kActBlockBytes = Rows16Q8_0::kActBlockBytes;
constexpr size_t kBlockBytes = Rows16Q8_0::kBlockBytes;

// One prefetch per line consumed, this far ahead, tied beside the loads
// (rows16_prefetch_beside): the hardware prefetcher alone leaves DRAM latency exposed.
constexpr int kPrefetchBytes = 4096;

struct Kernel {
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    const int64_t nb = cols / kQK0;
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, g += kBlockBytes) {
      // A block column is 544 bytes (8.5 lines): 9 prefetches cover it.
      __m512i wq[8];
      for (int s = 0; s < 8; ++s) {
        wq[s] = _mm512_loadu_si512(g + 32 + 64 * s);
        rows16_prefetch_beside(wq[s], g + kPrefetchBytes + 64 * s);
      }
      rows16_prefetch_beside(wq[7], g + kPrefetchBytes + 512);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
      for (int t = 0; t < NT; ++t) {
        const uint8_t* ab =
            act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * kActBlockBytes;
        const uint8_t* aq = ab + 8;  // (8) 4-byte groups of activation quants
        // Two chains so the vpdpbusd latency overlaps; integer sums are exact in any order.
        __m512i s0 = _mm512_set1_epi32(rows16_load_i32(ab + 4));
        __m512i s1 = _mm512_setzero_si512();
        for (int s = 0; s < 8; s += 2) {
          s0 = _mm512_dpbusd_epi32(s0, wq[s], _mm512_set1_epi32(rows16_load_i32(aq + 4 * s)));
          s1 = _mm512_dpbusd_epi32(s1, wq[s + 1],
                                   _mm512_set1_epi32(rows16_load_i32(aq + 4 * s + 4)));
        }
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(rows16_load_f32(ab)));
        acc[t] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), acc[t]);
      }
    }
    for (int t = 0; t < NT; ++t)
      _mm512_storeu_ps(out + static_cast<size_t>(t) * out_stride, acc[t]);
  }
};

}  // namespace

void rows16_q8_0_dot_avx512(int64_t cols, const void* group, const void* acts, size_t act_stride,
                            int n_tokens, float* out, size_t out_stride) {
  rows16_dot<Kernel>(cols, group, acts, act_stride, n_tokens, out, out_stride);
}

}  // namespace hearth::quant
