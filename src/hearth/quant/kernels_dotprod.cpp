// ARMv8.2 dot-product (SDOT) kernels, for cores with the asimddp feature.
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/neon_kernels.h"

namespace hearth::quant {
namespace {

struct SdotDot {
  static constexpr bool kFourRowKQuants = true;
  static int32x4_t dot(int32x4_t acc, int8x16_t a, int8x16_t b) { return vdotq_s32(acc, a, b); }
};

}  // namespace

VecDotFn dotprod_vec_dot(gguf::TensorType type) {
  return neon_table<SdotDot>(type);
}

VecDotRows4Fn dotprod_vec_dot_rows4(gguf::TensorType type) {
  return neon_rows4_table<SdotDot>(type);
}

}  // namespace hearth::quant
