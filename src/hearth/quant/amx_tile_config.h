// The 64-byte configuration that _tile_loadconfig takes (palette 1): the rows and bytes per row
// of each AMX tile register a kernel uses. Internal to the AMX kernels (rows16_*_amx.cpp) and the
// tile probe (compute/int8_peak_amx.cpp).
#pragma once

#include <cstdint>

namespace hearth::quant {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile t
  uint8_t rows[16] = {};    // rows of tile t
};
static_assert(sizeof(AmxTileConfig) == 64);

}  // namespace hearth::quant
