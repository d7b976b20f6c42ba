// CRC-32C (Castagnoli polynomial), the checksum of every wire message. Chosen over the IEEE
// CRC-32 for its better error detection on long messages and because x86 has an instruction
// for it: crc32c() uses the SSE4.2 crc32 instruction when the CPU has AVX2 (dispatch chosen
// once, the code lives in crc32c_avx2.cpp) and portable slicing-by-8 otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hearth::net {

// Continues a running CRC: pass the previous result as `crc` (0 to start).
uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc = 0);

// The portable implementation, always available (the reference the tests compare with).
uint32_t crc32c_portable(std::span<const uint8_t> bytes, uint32_t crc = 0);

namespace detail {
// Hardware path on raw (non-inverted) CRC state; defined in crc32c_avx2.cpp on x86 only.
uint32_t crc32c_update_sse42(uint32_t state, const uint8_t* p, size_t n);
}  // namespace detail

}  // namespace hearth::net
