// The traits tables: scalar reference functions, with each ISA's dot kernels swapped in.
#include "hearth/quant/type_traits.h"

#include <array>
#include <string>

#include "hearth/base/error.h"
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant {

namespace {

using T = TensorType;

constexpr std::array kReference = {
    TypeTraits{T::kF32, T::kF32, ref::f32_to_float, ref::quantize_f32, ref::dot_f32_f32},
    TypeTraits{T::kF16, T::kF32, ref::f16_to_float, ref::quantize_f16, ref::dot_f16_f32},
    TypeTraits{T::kBF16, T::kF32, ref::bf16_to_float, ref::quantize_bf16, ref::dot_bf16_f32},
    TypeTraits{T::kQ8_0, T::kQ8_0, ref::q8_0_to_float, ref::quantize_q8_0, ref::dot_q8_0_q8_0},
    TypeTraits{T::kQ4_0, T::kQ8_0, ref::q4_0_to_float, ref::quantize_q4_0, ref::dot_q4_0_q8_0},
    TypeTraits{T::kQ4_K, T::kQ8_K, ref::q4_k_to_float, ref::quantize_q4_k, ref::dot_q4_k_q8_k},
    TypeTraits{T::kQ5_K, T::kQ8_K, ref::q5_k_to_float, ref::quantize_q5_k, ref::dot_q5_k_q8_k},
    TypeTraits{T::kQ6_K, T::kQ8_K, ref::q6_k_to_float, ref::quantize_q6_k, ref::dot_q6_k_q8_k},
    TypeTraits{T::kQ8_K, T::kQ8_K, ref::q8_k_to_float, ref::quantize_q8_k, nullptr},
};
constexpr size_t kNumTypes = kReference.size();
constexpr int kNumIsas = 5;

using Table = std::array<TypeTraits, kNumTypes>;

VecDotFn isa_dot(Isa isa, TensorType type) {
  switch (isa) {
#if defined(__x86_64__)
    case Isa::kAvx2:
      return avx2_vec_dot(type);
    case Isa::kAvx512:
      return avx512_vec_dot(type);
#endif
#if defined(__aarch64__)
    case Isa::kNeon:
      return neon_vec_dot(type);
    case Isa::kNeonDotprod:
      return dotprod_vec_dot(type);
#endif
    default:
      return nullptr;
  }
}

Table build_table(Isa isa) {
  Table table{};
  for (size_t i = 0; i < kNumTypes; ++i) {
    table[i] = kReference[i];
#if defined(__x86_64__)
    // Before the vec_dot check: Q8_K is an activation-only type.
    QuantizeFn q = nullptr;
    if (isa == Isa::kAvx2) q = avx2_act_quantize(table[i].type);
    if (isa == Isa::kAvx512) q = avx512_act_quantize(table[i].type);
    if (q != nullptr) table[i].quantize = q;
#endif
    if (table[i].vec_dot == nullptr) continue;
    if (VecDotFn fn = isa_dot(isa, table[i].type)) table[i].vec_dot = fn;
    table[i].rows16 = scalar_rows16(table[i].type);
    if (const Rows16* fast = isa_rows16(table[i].type, isa)) {
      table[i].rows16 = fast;
      table[i].rows16_fast = true;
    }
#if defined(__x86_64__)
    if (isa == Isa::kAvx2) table[i].packed = avx2_packed_dot(table[i].type);
    if (isa == Isa::kAvx512) {
      table[i].vec_dot_x4 = avx512_vec_dot_x4(table[i].type);
      table[i].packed = avx512_packed_dot(table[i].type);
      table[i].prepared = avx512_prepared_dot(table[i].type);
    }
#endif
  }
  return table;
}

const Table& table_for(Isa isa) {
  static const std::array<Table, kNumIsas> tables = [] {
    std::array<Table, kNumIsas> t{};
    for (int i = 0; i < kNumIsas; ++i) t[i] = build_table(static_cast<Isa>(i));
    return t;
  }();
  return tables[static_cast<int>(isa)];
}

int index_of(TensorType t) {
  for (size_t i = 0; i < kNumTypes; ++i) {
    if (kReference[i].type == t) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool is_supported(TensorType t) {
  return index_of(t) >= 0;
}

const TypeTraits& traits_for_isa(TensorType t, Isa isa) {
  const int i = index_of(t);
  if (i < 0) {
    throw UsageError("tensor type " + std::string(gguf::tensor_type_name(t)) +
                     " is not supported by hearth's CPU kernels");
  }
  if (!isa_supported(isa)) {
    throw UsageError(std::string("ISA ") + isa_name(isa) + " is not supported by this CPU");
  }
  return table_for(isa)[static_cast<size_t>(i)];
}

const TypeTraits& traits(TensorType t) {
  return traits_for_isa(t, active_isa());
}

}  // namespace hearth::quant
