// The bandwidth probe's read loop with 512-bit loads (see bandwidth.h).
#include <immintrin.h>

#include "hearth/compute/bandwidth.h"

namespace hearth::compute::detail {

// Four independent accumulators keep four line loads in flight per iteration; the software
// prefetch 1 KiB ahead is the same distance matvec uses, so the probe is the best a plain
// stream gets with that strategy (measured: neither helps nor hurts the plain loop here).
uint64_t read_stream_avx512(const uint8_t* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    __builtin_prefetch(p + i + 1024, 0, 3);
    __builtin_prefetch(p + i + 1088, 0, 3);
    __builtin_prefetch(p + i + 1152, 0, 3);
    __builtin_prefetch(p + i + 1216, 0, 3);
    a0 = _mm512_add_epi64(a0, _mm512_loadu_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_loadu_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_loadu_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_loadu_si512(p + i + 192));
  }
  uint64_t tail = 0;
  for (; i < bytes; i += 64) tail += p[i];
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(
             _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)))) +
         tail;
}

}  // namespace hearth::compute::detail
