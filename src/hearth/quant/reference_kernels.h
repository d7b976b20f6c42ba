// Scalar reference implementations (internal to hearth_quant; tests include it too).
// The SIMD kernels in *_avx2.cpp / *_avx512.cpp / *_neon.cpp / *_dotprod.cpp compute the
// same integer sums per block, so they agree with these up to float summation order.
#pragma once

#include <cstdint>

namespace hearth::quant::ref {

// Dequantize n elements.
void f32_to_float(const void* src, float* dst, int64_t n);
void f16_to_float(const void* src, float* dst, int64_t n);
void bf16_to_float(const void* src, float* dst, int64_t n);
void q8_0_to_float(const void* src, float* dst, int64_t n);
void q4_0_to_float(const void* src, float* dst, int64_t n);
void q4_k_to_float(const void* src, float* dst, int64_t n);
void q5_k_to_float(const void* src, float* dst, int64_t n);
void q6_k_to_float(const void* src, float* dst, int64_t n);
void q8_k_to_float(const void* src, float* dst, int64_t n);

// Quantize n elements into valid blocks.
void quantize_f32(const float* src, void* dst, int64_t n);
void quantize_f16(const float* src, void* dst, int64_t n);
void quantize_bf16(const float* src, void* dst, int64_t n);
void quantize_q8_0(const float* src, void* dst, int64_t n);
void quantize_q4_0(const float* src, void* dst, int64_t n);
void quantize_q4_k(const float* src, void* dst, int64_t n);
void quantize_q5_k(const float* src, void* dst, int64_t n);
void quantize_q6_k(const float* src, void* dst, int64_t n);
void quantize_q8_k(const float* src, void* dst, int64_t n);

// Dot products, weight x activation (activation type per type_traits.h).
void dot_f32_f32(int64_t n, const void* w, const void* a, float* out);
void dot_f16_f32(int64_t n, const void* w, const void* a, float* out);
void dot_bf16_f32(int64_t n, const void* w, const void* a, float* out);
void dot_q8_0_q8_0(int64_t n, const void* w, const void* a, float* out);
void dot_q4_0_q8_0(int64_t n, const void* w, const void* a, float* out);
void dot_q4_k_q8_k(int64_t n, const void* w, const void* a, float* out);
void dot_q5_k_q8_k(int64_t n, const void* w, const void* a, float* out);
void dot_q6_k_q8_k(int64_t n, const void* w, const void* a, float* out);

}  // namespace hearth::quant::ref
