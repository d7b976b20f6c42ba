// The bandwidth probe's read loop with 256-bit loads (see bandwidth.h and bandwidth_simd.h).
#include <immintrin.h>

#include "hearth/compute/bandwidth.h"
#include "hearth/compute/bandwidth_simd.h"

namespace hearth::compute::detail {
namespace {

struct Vec256 {
  static constexpr size_t kBytes = 32;
  static __m256i zero() { return _mm256_setzero_si256(); }
  static __m256i load(const uint8_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static __m256i add(__m256i a, __m256i b) { return _mm256_add_epi64(a, b); }
  static uint64_t sum(__m256i s) {
    return static_cast<uint64_t>(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) +
                                 _mm256_extract_epi64(s, 2) + _mm256_extract_epi64(s, 3));
  }
};

}  // namespace

uint64_t read_stream_avx2(const uint8_t* p, size_t bytes) {
  return read_stream_loop<Vec256>(p, bytes);
}

}  // namespace hearth::compute::detail
