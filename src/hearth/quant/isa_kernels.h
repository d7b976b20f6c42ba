// Entry points of the per-ISA kernel files (internal). Each returns the dot kernel it has
// for a weight type, or nullptr (the scalar reference is used then). Only the functions of
// the current architecture exist; callers guard with the same #if.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/type_traits.h"

namespace hearth::quant {

using VecDotFn = void (*)(int64_t n, const void* w_row, const void* act_row, float* out);

// The vec_dot kernels of one ISA file, per weight type (nullptr where it has none).
struct VecDots {
  VecDotFn q4_k, q5_k, q6_k, q8_0, q4_0, f32, f16, bf16;
  // The kernel for a weight type; nullptr for the other types (isa_tables.cpp).
  VecDotFn find(gguf::TensorType type) const;
};

// out[t] = dot(w_row, act_rows + t * act_stride bytes) for t < 4 (see TypeTraits::vec_dot_x4).
using VecDotX4Fn = void (*)(int64_t n, const void* w_row, const void* act_rows, size_t act_stride,
                            float* out);
// Four weight rows (w_stride bytes apart) against one activation row: out[r] with VecDotFn's
// bits for row r (TypeTraits::vec_dot_rows4).
using VecDotRows4Fn = void (*)(int64_t n, const void* w_rows, size_t w_stride, const void* act_row,
                               float* out);

// Row-interleaved layouts (rows16_registry.cpp): the scalar kernels of a type, and an ISA's
// SIMD ones; nullptr when there are none.
const Rows16* scalar_rows16(gguf::TensorType type);
const Rows16* isa_rows16(gguf::TensorType type, Isa isa);

// Activation quantizer (same bits as the reference) for Q8_K / Q8_0; nullptr for others.
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n);

// The activation quantizers of one ISA file.
struct ActQuantizers {
  QuantizeFn q8_k, q8_0;
  // The quantizer for an activation type; nullptr for the other types (isa_tables.cpp).
  QuantizeFn find(gguf::TensorType type) const;
};

#if defined(__x86_64__)
QuantizeFn avx2_act_quantize(gguf::TensorType type);          // act_quant_avx2.cpp
QuantizeFn avx512_act_quantize(gguf::TensorType type);        // act_quant_avx512.cpp
VecDotFn avx2_vec_dot(gguf::TensorType type);                 // kernels_avx2.cpp
VecDotFn avx2_vec_dot_long(gguf::TensorType type);            // kernels_avx2.cpp
VecDotRows4Fn avx2_vec_dot_rows4(gguf::TensorType type);      // kernels_avx2.cpp
VecDotX4Fn avx2_vec_dot_x4(gguf::TensorType type);            // kernels_avx2.cpp
const PackedDot* avx2_packed_dot(gguf::TensorType type);      // kernels_avx2.cpp
const PreparedDot* avx2_prepared_dot(gguf::TensorType type);  // kernels_avx2.cpp
VecDotFn avx512_vec_dot(gguf::TensorType type);               // kernels_avx512.cpp
VecDotX4Fn avx512_vec_dot_x4(gguf::TensorType type);          // kernels_avx512.cpp
const PackedDot* avx512_packed_dot(gguf::TensorType type);
const PreparedDot* avx512_prepared_dot(gguf::TensorType type);    // kernels_avx512.cpp
const PreparedDot* avx512_k_prepared_dot(gguf::TensorType type);  // k_quants_decode_avx512.cpp
const PreparedDot* avx512_q6_k_prepared_dot();                    // q6_k_decode_avx512.cpp
#endif
#if defined(__aarch64__)
VecDotFn neon_vec_dot(gguf::TensorType type);                // kernels_neon.cpp
VecDotRows4Fn neon_vec_dot_rows4(gguf::TensorType type);     // kernels_neon.cpp
VecDotFn dotprod_vec_dot(gguf::TensorType type);             // kernels_dotprod.cpp
VecDotRows4Fn dotprod_vec_dot_rows4(gguf::TensorType type);  // kernels_dotprod.cpp
#endif

}  // namespace hearth::quant
