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

// The kernel lookups of one ISA's files, each returning nullptr for a type it has no kernel
// for; a lookup the ISA lacks altogether is nullptr.
struct IsaKernels {
  Isa isa;
  VecDotFn (*vec_dot)(TensorType);
  QuantizeFn (*act_quantize)(TensorType) = nullptr;
  const PackedDot* (*packed)(TensorType) = nullptr;
  VecDotX4Fn (*vec_dot_x4)(TensorType) = nullptr;
  const PreparedDot* (*prepared)(TensorType) = nullptr;
  VecDotFn (*vec_dot_long)(TensorType) = nullptr;
  VecDotRows4Fn (*vec_dot_rows4)(TensorType) = nullptr;
};

constexpr IsaKernels kIsaKernels[] = {
    {Isa::kScalar, nullptr},
#if defined(__x86_64__)
    {Isa::kAvx2, avx2_vec_dot, avx2_act_quantize, avx2_packed_dot, avx2_vec_dot_x4,
     avx2_prepared_dot, avx2_vec_dot_long, avx2_vec_dot_rows4},
    {Isa::kAvx512, avx512_vec_dot, avx512_act_quantize, avx512_packed_dot, avx512_vec_dot_x4,
     avx512_prepared_dot},  // AVX-512 decodes every block type through PreparedDot::dot_long
#endif
#if defined(__aarch64__)
    {Isa::kNeon, neon_vec_dot, nullptr, nullptr, nullptr, nullptr, nullptr, neon_vec_dot_rows4},
    {Isa::kNeonDotprod, dotprod_vec_dot, nullptr, nullptr, nullptr, nullptr, nullptr,
     dotprod_vec_dot_rows4},
#endif
};

const IsaKernels& kernels_of(Isa isa) {
  for (const IsaKernels& k : kIsaKernels) {
    if (k.isa == isa) return k;
  }
  return kIsaKernels[0];  // an ISA of another architecture: the reference alone
}

Table build_table(Isa isa) {
  const IsaKernels& k = kernels_of(isa);
  Table table{};
  for (size_t i = 0; i < kNumTypes; ++i) {
    TypeTraits& t = table[i];
    t = kReference[i];
    // Before the vec_dot check: Q8_K is an activation-only type.
    if (k.act_quantize != nullptr) {
      if (QuantizeFn q = k.act_quantize(t.type)) t.quantize = q;
    }
    if (t.vec_dot == nullptr) continue;
    if (k.vec_dot != nullptr) {
      if (VecDotFn fn = k.vec_dot(t.type)) t.vec_dot = fn;
    }
    t.rows16 = scalar_rows16(t.type);
    if (const Rows16* fast = isa_rows16(t.type, isa)) {
      t.rows16 = fast;
      t.rows16_fast = true;
    }
    if (k.packed != nullptr) t.packed = k.packed(t.type);
    if (k.vec_dot_x4 != nullptr) t.vec_dot_x4 = k.vec_dot_x4(t.type);
    if (k.prepared != nullptr) t.prepared = k.prepared(t.type);
    if (k.vec_dot_long != nullptr) t.vec_dot_long = k.vec_dot_long(t.type);
    if (k.vec_dot_rows4 != nullptr) t.vec_dot_rows4 = k.vec_dot_rows4(t.type);
    // Every type with a rows16 layout: its GGUF-layout kernels take rows16's float steps on
    // every ISA (block_steps.h).
    t.gguf_rows16_bits = t.rows16 != nullptr;
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
