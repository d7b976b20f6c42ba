// The lookups of the ISA files' kernel tables, compiled with the baseline flags (the ISA
// files only fill the tables in).
#include "hearth/quant/isa_kernels.h"

namespace hearth::quant {

VecDotFn VecDots::find(gguf::TensorType type) const {
  using T = gguf::TensorType;
  switch (type) {
    case T::kQ4_K:
      return q4_k;
    case T::kQ5_K:
      return q5_k;
    case T::kQ6_K:
      return q6_k;
    case T::kQ8_0:
      return q8_0;
    case T::kQ4_0:
      return q4_0;
    case T::kF32:
      return f32;
    case T::kF16:
      return f16;
    case T::kBF16:
      return bf16;
    default:
      return nullptr;
  }
}

QuantizeFn ActQuantizers::find(gguf::TensorType type) const {
  switch (type) {
    case gguf::TensorType::kQ8_K:
      return q8_k;
    case gguf::TensorType::kQ8_0:
      return q8_0;
    default:
      return nullptr;
  }
}

}  // namespace hearth::quant
