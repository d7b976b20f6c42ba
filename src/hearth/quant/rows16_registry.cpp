// Which weight types have a row-interleaved (rows16) layout, and on which ISAs it has SIMD
// kernels. Each type's layout and kernels live in rows16_<type>.cpp (scalar reference) and
// rows16_<type>_<isa>.cpp.
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/rows16_kernels.h"

namespace hearth::quant {

const Rows16* scalar_rows16(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ8_0:
      return &kRows16Q8_0Scalar;
    case gguf::TensorType::kQ4_K:
      return &kRows16Q4_KScalar;
    case gguf::TensorType::kQ6_K:
      return &kRows16Q6_KScalar;
    default:
      return nullptr;
  }
}

const Rows16* isa_rows16(gguf::TensorType type, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) {
    switch (type) {
      case gguf::TensorType::kQ8_0:
        return &kRows16Q8_0Avx512;
      case gguf::TensorType::kQ4_K:
        return &kRows16Q4_KAvx512;
      case gguf::TensorType::kQ6_K:
        return &kRows16Q6_KAvx512;
      default:
        return nullptr;
    }
  }
  if (isa == Isa::kAvx2) {
    switch (type) {
      case gguf::TensorType::kQ8_0:
        return &kRows16Q8_0Avx2;
      case gguf::TensorType::kQ4_K:
        return &kRows16Q4_KAvx2;
      default:
        return nullptr;
    }
  }
#endif
#if defined(__aarch64__)
  if (isa == Isa::kNeon || isa == Isa::kNeonDotprod) {
    switch (type) {
      case gguf::TensorType::kQ8_0:
        return isa == Isa::kNeon ? &kRows16Q8_0Neon : &kRows16Q8_0Dotprod;
      default:
        return nullptr;
    }
  }
#endif
  (void)type;
  (void)isa;
  return nullptr;
}

}  // namespace hearth::quant
