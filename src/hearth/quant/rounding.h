// Rounding helper for the quantizers (internal).
#pragma once

namespace hearth::quant {

// Round to nearest, ties to even, for |v| <= 2^22 (quantizer arguments are at most a few
// hundred): adding and removing 1.5 * 2^23 leaves no fraction bits, so the float adder rounds
// in the default mode. Unlike std::nearbyint it vectorizes on baseline x86-64 (no SSE4.1).
// NaN stays NaN; the callers' int conversion then yields an unspecified quant, never a trap.
inline float round_to_nearest_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

}  // namespace hearth::quant
