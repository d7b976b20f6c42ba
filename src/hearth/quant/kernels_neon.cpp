// Baseline aarch64 Advanced SIMD dot kernels (any ARMv8 core).
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/neon_kernels.h"

namespace hearth::quant {
namespace {

// Widening multiplies (exact in int16: |products| <= 128 * 127) and pairwise accumulation.
struct NeonDot {
  static constexpr bool kFourRowKQuants = false;
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
  }
};

}  // namespace

VecDotFn neon_vec_dot(gguf::TensorType type) {
  return neon_table<NeonDot>(type);
}

VecDotRows4Fn neon_vec_dot_rows4(gguf::TensorType type) {
  return neon_rows4_table<NeonDot>(type);
}

}  // namespace hearth::quant
