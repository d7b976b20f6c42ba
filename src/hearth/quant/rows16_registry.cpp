// Which weight types have a row-interleaved (rows16) layout, and on which ISAs it has SIMD
// kernels: one row per type. Each type's layout and kernels live in rows16_<type>.cpp (scalar
// reference) and rows16_<type>_<isa>.cpp; an ISA without kernels for a type is nullptr.
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/rows16_kernels.h"

#include <iterator>

namespace hearth::quant {
namespace {

struct Rows16Row {
  gguf::TensorType type;
  const Rows16* scalar;
  const Rows16* simd[5];  // indexed by Isa (kScalar's slot unused)
};

#if defined(__x86_64__)
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0,
     &kRows16Q8_0Scalar,
     {nullptr, &kRows16Q8_0Avx2, &kRows16Q8_0Avx512, nullptr, nullptr}},
    {gguf::TensorType::kQ4_K,
     &kRows16Q4_KScalar,
     {nullptr, &kRows16Q4_KAvx2, &kRows16Q4_KAvx512, nullptr, nullptr}},
    {gguf::TensorType::kQ6_K,
     &kRows16Q6_KScalar,
     {nullptr, &kRows16Q6_KAvx2, &kRows16Q6_KAvx512, nullptr, nullptr}},
};
#elif defined(__aarch64__)
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0,
     &kRows16Q8_0Scalar,
     {nullptr, nullptr, nullptr, &kRows16Q8_0Neon, &kRows16Q8_0Dotprod}},
    {gguf::TensorType::kQ4_K, &kRows16Q4_KScalar, {}},
    {gguf::TensorType::kQ6_K, &kRows16Q6_KScalar, {}},
};
#else
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0, &kRows16Q8_0Scalar, {}},
    {gguf::TensorType::kQ4_K, &kRows16Q4_KScalar, {}},
    {gguf::TensorType::kQ6_K, &kRows16Q6_KScalar, {}},
};
#endif

const Rows16Row* find_row(gguf::TensorType type) {
  for (const Rows16Row& row : kRows16Table) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

}  // namespace

const Rows16* scalar_rows16(gguf::TensorType type) {
  const Rows16Row* row = find_row(type);
  return row != nullptr ? row->scalar : nullptr;
}

const Rows16* isa_rows16(gguf::TensorType type, Isa isa) {
  const Rows16Row* row = find_row(type);
  const auto i = static_cast<size_t>(isa);
  return row != nullptr && isa != Isa::kScalar && i < std::size(row->simd) ? row->simd[i] : nullptr;
}

}  // namespace hearth::quant
