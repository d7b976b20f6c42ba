// Software prefetch into L2 for the GGUF-layout decode kernels of x86 (kernels_avx2.cpp,
// kernels_avx512.cpp, k_quants_decode_avx512.cpp). In an unnamed namespace, as
// x86_dot_common.h, so that each kernel file keeps its own copy.
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace hearth::quant {
namespace {

// How far ahead the long-row decode kernels (TypeTraits::vec_dot_long, PreparedDot::dot_long)
// prefetch their weights into L2 (prefetch_l2_ahead): side by side on 4096x14336 matrices
// with AVX-512, 6 KiB streamed best at 2 threads, clearly ahead of 2 KiB; 4 KiB was slower at
// one thread, 8 KiB at two (docs/kernels.md, "GGUF-layout streaming").
constexpr size_t kLongRowL2Ahead = 6144;
// How far ahead the four-row decode kernels (PreparedDot::dot_rows4) prefetch, at every row
// length, for rows w_stride bytes apart: at least one call's rows (four strides) and at least
// four times the one-row distance. On the hardware prefetcher alone their four interleaved
// streams read far more slowly than one row at a time; short rows wanted a few times the
// one-row distance, Q8_0's long rows the four strides (docs/kernels.md, "Four rows a call").
inline size_t rows4_l2_ahead(size_t w_stride) {
  const size_t ahead = 4 * w_stride > 4 * kLongRowL2Ahead ? 4 * w_stride : 4 * kLongRowL2Ahead;
  return ahead / 64 * 64;
}

// Software prefetch into L2 of the weight bytes [p, p + Bytes) shifted `ahead` bytes on, one
// per 64-byte line; nothing when ahead is 0. Decode kernels call it once per block (or group)
// they read, so the prefetches run evenly beside the loads (a burst per row streamed slower).
// Why matvec wants it for long rows: TypeTraits::vec_dot_long.
template <size_t Bytes>
[[gnu::always_inline]] inline void prefetch_l2_at(const void* p, size_t ahead) {
  if (ahead == 0) return;
  const char* q = static_cast<const char*>(p) + ahead;
  for (size_t o = 0; o < Bytes; o += 64) _mm_prefetch(q + o, _MM_HINT_T1);
}
// The same with the distance fixed at compile time (the one-row kernels' kLongRowL2Ahead).
template <size_t kAhead, size_t Bytes>
[[gnu::always_inline]] inline void prefetch_l2_ahead(const void* p) {
  prefetch_l2_at<Bytes>(p, kAhead);
}

}  // namespace
}  // namespace hearth::quant
