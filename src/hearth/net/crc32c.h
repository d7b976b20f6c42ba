// CRC-32C (Castagnoli polynomial), the checksum of every wire message. Chosen over the IEEE
// CRC-32 for its better error detection on long messages; computed in portable code
// (slicing by 8) so the whole binary runs on any CPU, at roughly 1-2 GB/s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hearth::net {

// Continues a running CRC: pass the previous result as `crc` (0 to start).
uint32_t crc32c(std::span<const uint8_t> bytes, uint32_t crc = 0);

}  // namespace hearth::net
