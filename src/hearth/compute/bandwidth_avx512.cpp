// The bandwidth probe's read loop with 512-bit loads (see bandwidth.h and bandwidth_simd.h).
#include <immintrin.h>

#include "hearth/compute/bandwidth.h"
#include "hearth/compute/bandwidth_simd.h"

namespace hearth::compute::detail {
namespace {

struct Vec512 {
  static constexpr size_t kBytes = 64;
  static __m512i zero() { return _mm512_setzero_si512(); }
  static __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static __m512i add(__m512i a, __m512i b) { return _mm512_add_epi64(a, b); }
  static uint64_t sum(__m512i s) { return static_cast<uint64_t>(_mm512_reduce_add_epi64(s)); }
};

}  // namespace

uint64_t read_stream_avx512(const uint8_t* p, size_t bytes) {
  return read_stream_loop<Vec512>(p, bytes);
}

}  // namespace hearth::compute::detail
