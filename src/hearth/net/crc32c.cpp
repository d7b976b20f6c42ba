#include "hearth/net/crc32c.h"

#include <array>

namespace hearth::net {

namespace {

// Reflected Castagnoli polynomial.
constexpr uint32_t kPoly = 0x82F63B78u;

// (8, 256) u32: table[k][b] is the CRC contribution of byte b followed by k zero bytes, so
// eight input bytes are folded per step instead of one.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1u) != 0 ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (size_t k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

uint32_t crc32c_portable(std::span<const uint8_t> bytes, uint32_t crc) {
  uint32_t c = ~crc;
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  // Bytes are combined explicitly (not loaded as a u64) so the result is the same on any
  // endianness and no unaligned load is needed.
  while (n >= 8) {
    const uint32_t lo =
        c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    c = kTables[7][lo & 0xFFu] ^ kTables[6][(lo >> 8) & 0xFFu] ^ kTables[5][(lo >> 16) & 0xFFu] ^
        kTables[4][lo >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^
        kTables[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xFFu];
  return ~c;
}

namespace {

bool use_hardware() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc) {
#if defined(__x86_64__)
  if (use_hardware()) return ~detail::crc32c_update_sse42(~crc, bytes.data(), bytes.size());
#endif
  (void)use_hardware;
  return crc32c_portable(bytes, crc);
}

}  // namespace hearth::net
