// CRC-32C with the SSE4.2 crc32 instruction. Built only on x86 with the AVX2 flag set (which
// implies SSE4.2), and called only after crc32c.cpp has checked the CPU at run time.
#include <immintrin.h>

#include <cstring>

#include "hearth/net/crc32c.h"

namespace hearth::net::detail {

uint32_t crc32c_update_sse42(uint32_t state, const uint8_t* p, size_t n) {
  uint64_t c = state;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // the instruction consumes bytes in little-endian order, as x86 loads
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

}  // namespace hearth::net::detail
