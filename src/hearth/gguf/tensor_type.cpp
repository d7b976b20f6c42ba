#include "hearth/gguf/tensor_type.h"

#include <array>

namespace hearth::gguf {

namespace {
using T = TensorType;
// Sizes follow the GGUF/ggml block layouts (e.g. Q4_K: 2 fp16 scales + 12 bytes of 6-bit
// sub-block scales + 128 bytes of nibbles for 256 weights).
constexpr std::array kTypes = {
    TensorTypeInfo{T::kF32, "f32", 1, 4},
    TensorTypeInfo{T::kF16, "f16", 1, 2},
    TensorTypeInfo{T::kQ4_0, "q4_0", 32, 18},
    TensorTypeInfo{T::kQ4_1, "q4_1", 32, 20},
    TensorTypeInfo{T::kQ5_0, "q5_0", 32, 22},
    TensorTypeInfo{T::kQ5_1, "q5_1", 32, 24},
    TensorTypeInfo{T::kQ8_0, "q8_0", 32, 34},
    TensorTypeInfo{T::kQ8_1, "q8_1", 32, 36},
    TensorTypeInfo{T::kQ2_K, "q2_k", 256, 84},
    TensorTypeInfo{T::kQ3_K, "q3_k", 256, 110},
    TensorTypeInfo{T::kQ4_K, "q4_k", 256, 144},
    TensorTypeInfo{T::kQ5_K, "q5_k", 256, 176},
    TensorTypeInfo{T::kQ6_K, "q6_k", 256, 210},
    TensorTypeInfo{T::kQ8_K, "q8_k", 256, 292},
    TensorTypeInfo{T::kIQ2_XXS, "iq2_xxs", 256, 66},
    TensorTypeInfo{T::kIQ2_XS, "iq2_xs", 256, 74},
    TensorTypeInfo{T::kIQ3_XXS, "iq3_xxs", 256, 98},
    TensorTypeInfo{T::kIQ1_S, "iq1_s", 256, 50},
    TensorTypeInfo{T::kIQ4_NL, "iq4_nl", 32, 18},
    TensorTypeInfo{T::kIQ3_S, "iq3_s", 256, 110},
    TensorTypeInfo{T::kIQ2_S, "iq2_s", 256, 82},
    TensorTypeInfo{T::kIQ4_XS, "iq4_xs", 256, 136},
    TensorTypeInfo{T::kI8, "i8", 1, 1},
    TensorTypeInfo{T::kI16, "i16", 1, 2},
    TensorTypeInfo{T::kI32, "i32", 1, 4},
    TensorTypeInfo{T::kI64, "i64", 1, 8},
    TensorTypeInfo{T::kF64, "f64", 1, 8},
    TensorTypeInfo{T::kIQ1_M, "iq1_m", 256, 56},
    TensorTypeInfo{T::kBF16, "bf16", 1, 2},
    TensorTypeInfo{T::kTQ1_0, "tq1_0", 256, 54},
    TensorTypeInfo{T::kTQ2_0, "tq2_0", 256, 66},
};
}  // namespace

std::optional<TensorTypeInfo> tensor_type_info(uint32_t raw_type) {
  for (const auto& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == raw_type) return info;
  }
  return std::nullopt;
}

const TensorTypeInfo& tensor_type_info(TensorType type) {
  for (const auto& info : kTypes) {
    if (info.type == type) return info;
  }
  return kTypes[0];  // unreachable for valid enum values
}

std::string_view tensor_type_name(TensorType type) {
  return tensor_type_info(type).name;
}

std::optional<TensorType> tensor_type_from_name(std::string_view name) {
  for (const auto& info : kTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(TensorType type, uint64_t elems) {
  const auto& info = tensor_type_info(type);
  if (elems % info.block_elems != 0) return std::nullopt;
  return elems / info.block_elems * info.block_bytes;
}

}  // namespace hearth::gguf
