// Tensor element types as numbered in GGUF files (the ggml type ids), with the block
// geometry every reader needs to validate sizes. Compute traits (dequantize, dot
// products) live in hearth/quant/type_traits.h and are keyed by this enum.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace hearth::gguf {

enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
};

// Storage geometry: `block_elems` consecutive elements of a row are stored in
// `block_bytes` bytes. A row's element count must be a multiple of block_elems.
struct TensorTypeInfo {
  TensorType type;
  std::string_view name;  // lower case, as GGUF tools print it: "q4_k", "f16"
  uint32_t block_elems;
  uint32_t block_bytes;
};

// Geometry of a type id read from a file; nullopt for ids this build does not know.
std::optional<TensorTypeInfo> tensor_type_info(uint32_t raw_type);
const TensorTypeInfo& tensor_type_info(TensorType type);
std::string_view tensor_type_name(TensorType type);
// Parses a lower-case name ("q4_k"); nullopt when unknown.
std::optional<TensorType> tensor_type_from_name(std::string_view name);

// Bytes taken by one row of `elems` elements, or nullopt if elems is not a whole number of
// blocks.
std::optional<uint64_t> row_bytes(TensorType type, uint64_t elems);

}  // namespace hearth::gguf
