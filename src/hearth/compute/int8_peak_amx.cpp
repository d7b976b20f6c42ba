// The AMX tile probe's loop (see int8_peak.h).
#include <immintrin.h>

#include "hearth/compute/int8_peak.h"
#include "hearth/quant/amx_tile_config.h"

namespace hearth::compute::detail {

// Four tdpbusd a turn into four sum tiles from two activation and two weight tiles, loaded
// once: the tile unit's own rate, with no operand loads or stores in the way. Each product
// depends only on its own sum tile from the turn before, so four keep the unit busy. The tile
// state is this thread's (configured here, released at the end).
uint64_t amx_tile_loop(int64_t iterations) {
  static const quant::AmxTileConfig config = [] {
    quant::AmxTileConfig c;
    for (int t = 0; t < 8; ++t) {
      c.rows[t] = 16;
      c.colsb[t] = 64;
    }
    return c;
  }();
  alignas(64) static const struct Operand {
    int8_t bytes[16 * 64];
    Operand() {
      for (int i = 0; i < 16 * 64; ++i) bytes[i] = static_cast<int8_t>(i % 7 - 3);
    }
  } operand;
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand.bytes, 64);
  _tile_loadd(5, operand.bytes, 64);
  _tile_loadd(6, operand.bytes, 64);
  _tile_loadd(7, operand.bytes, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _tile_release();
  return static_cast<uint64_t>(iterations) * 4 * (16 * 16 * 64);  // multiply-adds per product
}

}  // namespace hearth::compute::detail
