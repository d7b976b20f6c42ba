// The lookups of the ISA files' kernel tables, compiled with the baseline flags (the ISA
// files only fill the tables in).
#include <initializer_list>
#include <utility>

#include "hearth/quant/isa_kernels.h"

namespace hearth::quant {

namespace {

using T = gguf::TensorType;

template <typename Fn>
Fn find_by_type(std::initializer_list<std::pair<T, Fn>> kernels, T type) {
  for (const auto& [t, fn] : kernels) {
    if (t == type) return fn;
  }
  return nullptr;
}

}  // namespace

VecDotFn VecDots::find(T type) const {
  return find_by_type<VecDotFn>({{T::kQ4_K, q4_k},
                                 {T::kQ5_K, q5_k},
                                 {T::kQ6_K, q6_k},
                                 {T::kQ8_0, q8_0},
                                 {T::kQ4_0, q4_0},
                                 {T::kF32, f32},
                                 {T::kF16, f16},
                                 {T::kBF16, bf16}},
                                type);
}

QuantizeFn ActQuantizers::find(T type) const {
  return find_by_type<QuantizeFn>({{T::kQ8_K, q8_k}, {T::kQ8_0, q8_0}}, type);
}

}  // namespace hearth::quant
