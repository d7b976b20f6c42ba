// F32 / F16 / BF16 rows: conversion and the reference dot against f32 activations.
#include <cstring>

#include "hearth/base/half.h"
#include "hearth/quant/reference_kernels.h"

namespace hearth::quant::ref {

void f32_to_float(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void f16_to_float(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);  // (n) fp16
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(h[i]);
}

void bf16_to_float(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const uint16_t*>(src);  // (n) bf16
  for (int64_t i = 0; i < n; ++i) dst[i] = hearth::bf16_to_float(b[i]);
}

void quantize_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

void quantize_f16(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);  // (n) fp16
  for (int64_t i = 0; i < n; ++i) h[i] = float_to_half(src[i]);
}

void quantize_bf16(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<uint16_t*>(dst);  // (n) bf16
  for (int64_t i = 0; i < n; ++i) b[i] = float_to_bf16(src[i]);
}

// Float dots accumulate in double: the reference should be the most accurate answer.
void dot_f32_f32(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * y[i];
  *out = static_cast<float>(s);
}

void dot_f16_f32(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(half_to_float(x[i])) * y[i];
  *out = static_cast<float>(s);
}

void dot_bf16_f32(int64_t n, const void* w, const void* a, float* out) {
  const auto* x = static_cast<const uint16_t*>(w);
  const auto* y = static_cast<const float*>(a);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(hearth::bf16_to_float(x[i])) * y[i];
  *out = static_cast<float>(s);
}

}  // namespace hearth::quant::ref
