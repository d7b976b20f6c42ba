// Small helpers shared by the rows16 kernel files. Everything has internal linkage (unnamed
// namespace): the files are compiled with different ISA flags, and an inline function with
// external linkage would let the linker keep, say, the AVX-512 build for every caller.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace hearth::quant {
namespace {

inline int32_t rows16_load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline float rows16_load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

#if defined(__x86_64__) || defined(__i386__)
// Software prefetch (into L1) of the line at `ahead`, tied to the vector `v` just loaded: the
// asm takes v as an operand, so the compiler keeps one prefetch beside each load. Left to
// itself it hoists a loop's prefetches into one burst per loop, which streamed ~6% slower
// (Q4_K, 2 threads, same distance); a tied prefetch is also what lets a longer distance pay.
template <typename V>
inline void rows16_prefetch_beside(V& v, const uint8_t* ahead) {
  asm volatile("prefetcht0 (%1)" : "+v"(v) : "r"(ahead));
}
#endif

// Calls fn(std::integral_constant<int, N>) with N = n_tokens (1..4; larger counts take 4),
// so kernels can keep one accumulator set per token in registers.
template <typename Fn>
inline void rows16_by_tokens(int n_tokens, Fn&& fn) {
  switch (n_tokens) {
    case 1:
      return fn(std::integral_constant<int, 1>{});
    case 2:
      return fn(std::integral_constant<int, 2>{});
    case 3:
      return fn(std::integral_constant<int, 3>{});
    default:
      return fn(std::integral_constant<int, 4>{});
  }
}

// The Rows16::dot entry for a kernel struct K with
//   template <int NT> static void run(int64_t cols, const uint8_t* group, const uint8_t* acts,
//                                     size_t act_stride, float* out, size_t out_stride);
template <typename K>
void rows16_dot(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
                float* out, size_t out_stride) {
  rows16_by_tokens(n_tokens, [&](auto nt) {
    K::template run<decltype(nt)::value>(cols, static_cast<const uint8_t*>(group),
                                         static_cast<const uint8_t*>(acts), act_stride, out,
                                         out_stride);
  });
}

}  // namespace
}  // namespace hearth::quant
