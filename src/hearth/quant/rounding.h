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

// An activation quant: v clamped to [-127, 127], then rounded to nearest even. The clamp is
// the two comparisons x86's maxps/minps make with the bound as second operand, so the SIMD
// quantizers give the same bits for every input: NaN -> -127, +inf -> 127, -inf -> -127.
// Rounding first gives the same bits as clamping first for all 2^32 inputs (the rounding
// is monotone and keeps +-127, inf and NaN), and is the order GCC vectorizes: clamping
// first, it folds the rounding of the bounds into branches and the loop stays scalar.
inline float clamp_round_127(float v) {
  v = round_to_nearest_even(v);
  v = v > -127.0f ? v : -127.0f;
  return v < 127.0f ? v : 127.0f;
}

}  // namespace hearth::quant
