// The row-interleaved (rows16) layouts of each weight type: the scalar reference functions
// and the per-ISA kernels (internal to hearth_quant; tests include it too). See Rows16 in
// type_traits.h for the contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hearth/quant/type_traits.h"

namespace hearth::quant {

// Q8_0 (rows16_q8_0.cpp). Group = 16 rows; per block column b, at b * 544 bytes:
//   (16) fp16 d, row r at 2r;
//   (8 slices, 16 rows, 4 bytes) quants: slice s of row r at 32 + 64s + 4r holds elements
//   4s..4s+3 of the row's block b, each stored as q ^ 0x80 (= q + 128, unsigned).
// Prepared activation, per block (40 bytes): f32 d, i32 -128 * sum(q), (32) i8 q.
// Per (row, token): isum_b = corr_b + sum((q_w + 128) * q_a) (exact), then
// acc = fma(d_w * d_a, float(isum_b), acc) for b = 0, 1, ... in order.
namespace rows16_q8_0 {
constexpr size_t kBlockBytes = 32 + 16 * 32;  // one block column of a group
constexpr size_t kActBlockBytes = 8 + 32;     // one prepared activation block
size_t group_bytes(int64_t cols);
void repack(int64_t cols, const void* src, size_t src_row_bytes, void* group);
void unpack(int64_t cols, const void* group, void* dst, size_t dst_row_bytes);
size_t act_bytes(int64_t cols);
void prepare_act(int64_t cols, const void* act_row, void* dst);
void dot_scalar(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
                float* out, size_t out_stride);
// The Q8_0 Rows16 entry with a given dot kernel (the layout functions are shared).
constexpr Rows16 with_dot(decltype(Rows16::dot) dot) {
  return {group_bytes, repack, unpack, act_bytes, prepare_act, dot};
}
}  // namespace rows16_q8_0
extern const Rows16 kRows16Q8_0Scalar;
#if defined(__x86_64__)
extern const Rows16 kRows16Q8_0Avx512;  // rows16_q8_0_avx512.cpp
extern const Rows16 kRows16Q8_0Avx2;    // rows16_q8_0_avx2.cpp
#endif
#if defined(__aarch64__)
extern const Rows16 kRows16Q8_0Neon;     // rows16_q8_0_neon.cpp
extern const Rows16 kRows16Q8_0Dotprod;  // rows16_q8_0_dotprod.cpp
#endif

}  // namespace hearth::quant
