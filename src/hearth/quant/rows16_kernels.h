// The row-interleaved (rows16) layouts of each weight type: their sizes, scalar reference
// tables and per-ISA dot kernels (internal to hearth_quant; tests include it too). See Rows16 in
// type_traits.h for the contract.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/type_traits.h"

namespace hearth::quant {

// The sizes of a rows16 layout: a block column (kBlockCols elements of each of the 16 rows)
// takes kBlockBytes in a group, and one prepared activation block takes kActBlockBytes.
// Each layout's functions are file-local to rows16_<type>.cpp.
template <int64_t BlockCols, size_t BlockBytes, size_t ActBlockBytes>
struct Rows16Shape {
  static constexpr int64_t kBlockCols = BlockCols;
  static constexpr size_t kBlockBytes = BlockBytes;
  static constexpr size_t kActBlockBytes = ActBlockBytes;
};

// Q8_0 (rows16_q8_0.cpp). Group = 16 rows; per block column b, at b * 544 bytes:
//   (16) fp16 d, row r at 2r;
//   (8 slices, 16 rows, 4 bytes) quants: slice s of row r at 32 + 64s + 4r holds elements
//   4s..4s+3 of the row's block b, each stored as q ^ 0x80 (= q + 128, unsigned).
// Prepared activation, per block (40 bytes): f32 d, i32 -128 * sum(q), (32) i8 q.
// Per (row, token): isum_b = corr_b + sum((q_w + 128) * q_a) (exact), then
// acc = fma(d_w * d_a, float(isum_b), acc) for b = 0, 1, ... in order.
using Rows16Q8_0 = Rows16Shape<kQK0, 32 + 16 * 32, 8 + 32>;

// Q4_0 (rows16_q4_0.cpp). Group = 16 rows; per block column b, at b * 288 bytes (as GGUF):
//   (16) fp16 d, row r at 2r;
//   (4 slices, 16 rows, 4 bytes) quants: slice s of row r at 32 + 64s + 4r holds the GGUF
//        bytes qs[4s .. 4s + 3] of the row's block b (low nibbles: elements 4s..4s+3, high
//        nibbles: elements 16 + 4s .. 16 + 4s + 3).
// Prepared activation, per block (40 bytes): f32 d, i32 -8 * sum(q), (32) i8 q.
// Per (row, token): isum_b = corr_b + sum(nibble * q_a) (exact), then
// acc = fma(d_w * d_a, float(isum_b), acc) for b = 0, 1, ... in order.
using Rows16Q4_0 = Rows16Shape<kQK0, 32 + 16 * 16, 8 + 32>;

// Q4_K (rows16_q4_k.cpp). Group = 16 rows; per 256-element super-block column, kBlockBytes:
//   0    (16) fp16 d, row r at 2r;   32 (16) fp16 dmin
//   64   (8, 16) u8 sub-block scales: sub-block j of row r at 64 + 16j + r
//   192  (4, 16, 2) u8 mins in pairs: (m[2p], m[2p+1]) of row r at 192 + 32p + 2r
//   320  (4 pairs, 8 slices, 16 rows, 4 bytes) quants: GGUF bytes qs[32p + 4s .. +3] of row
//        r at 320 + 512p + 64s + 4r (low nibbles: sub-block 2p elements 4s..4s+3, high
//        nibbles: sub-block 2p+1, as GGUF packs them)
// 2368 bytes per 16 rows (GGUF: 2304). Prepared activation per super-block (288 bytes):
// f32 d, 12 bytes padding, (4, 2) i16 sub-block sums (bsum[2p], bsum[2p+1]), (256) i8 q.
// Per (row, token) and super-block: S1 = sum_j sc[j] * sum(q_w * q_a over sub-block j),
// S2 = sum_j m[j] * bsum[j] (exact int32), then acc = fma(d * d_a, float(S1), acc);
// acc = fma(-(dmin * d_a), float(S2), acc).
using Rows16Q4_K = Rows16Shape<kQKK, 320 + 2048, 16 + 16 + 256>;

// Q5_K (rows16_q5_k.cpp). Group = 16 rows; per super-block column, kBlockBytes: Q4_K's
// header (bytes 0-319: d, dmin, scales, mins), then
//   320  (4 pairs, 2 quads of slices, 16 rows, 4 bytes) high bits of slices 4c .. 4c + 3 of
//        pair p, row r, at 320 + 128p + 64c + 4r + i (i: element 4s + i of the slice): bits
//        2(s - 4c) and 2(s - 4c) + 1 are bits 3 and 4 of sub-block 2p + 1's quant
//   832  five-bit bytes, one per element pair where Q4_K holds its low 4 bits at 320 (element
//        4s + i of sub-blocks 2p and 2p + 1 of row r at 832 + 512p + 64s + 4r + i): bits 0-4
//        sub-block 2p's quant whole, bits 5-7 bits 0-2 of 2p + 1's
// A kernel takes sub-block 2p's quants with one mask, and 2p + 1's with a shift of the byte
// and its two bits from the high-bit vector, one immediate shift away from bits 3 and 4: five
// ops per 64 bytes on AVX-512, where quant nibbles and both fifth bits in the high-bit vector
// took seven (docs/kernels.md, "Two groups per pass"). One high-bit vector serves four slices
// of one pair, so a kernel loads it once per four quant vectors. The high bits come before
// the quants because the kernels read them with the first pair: the bytes lie in the order
// they are first read. rows16_mix_q5_k (rows16_common.h) turns Q4_K's arrangement with both
// fifth bits in the high-bit vector into this one.
// 2880 bytes per 16 rows (GGUF: 2816). Prepared activation and per (row, token) sums as Q4_K,
// with the 5-bit quants (0..31).
using Rows16Q5_K = Rows16Shape<kQKK, 320 + 512 + 2048, 16 + 16 + 256>;

// Where a Q4_K or Q5_K block column keeps its low 4 bits, and Q5_K its high bits.
constexpr int kRows16Q4_KQuants = 320;
constexpr int kRows16Q5_KHighBits = 320;
constexpr int kRows16Q5_KQuants = 832;

// Q6_K (rows16_q6_k.cpp). Group = 16 rows; per 256-element super-block column, kBlockBytes:
//   0    (16) fp16 d, row r at 2r
//   32   (16, 16) i8 group scales: group g (elements 16g..16g+15) of row r at 32 + 16g + r
//   288  per group g at 288 + 192g, three (16 rows, 4 bytes) vectors; for e < 4 and row r,
//        with q4 = q[16g+12+e] spread over the top bits:
//        +0:   byte 4r+e = q[16g+e]   | (q4 & 3) << 6
//        +64:  byte 4r+e = q[16g+4+e] | (q4 >> 2 & 3) << 6
//        +128: byte 4r+e = q[16g+8+e] | (q4 >> 4) << 6
//        (q: the 6-bit quant, 0..63; value = d * scale * (q - 32))
// 3360 bytes per 16 rows, as GGUF. Prepared activation per super-block (336 bytes): f32 d,
// 12 bytes padding, (16) i32 -32 * (sum of group g's 16 quants), (256) i8 q.
// Per (row, token) and super-block: S = sum_g sc[g] * (corr[g] + sum(q_w * q_a over g))
// (exact int32), then acc = fma(d * d_a, float(S), acc).
using Rows16Q6_K = Rows16Shape<kQKK, 288 + 16 * 192, 16 + 64 + 256>;

// The scalar reference of each layout (rows16_<type>.cpp); rows16_registry.cpp pairs its
// layout functions with the SIMD kernels below.
extern const Rows16 kRows16Q8_0Scalar, kRows16Q4_0Scalar, kRows16Q4_KScalar, kRows16Q5_KScalar,
    kRows16Q6_KScalar;

// The SIMD Rows16::dot kernels, each in rows16_<type>_<isa>.cpp.
using Rows16DotKernel = void(int64_t cols, const void* group, const void* acts, size_t act_stride,
                             int n_tokens, float* out, size_t out_stride);
// Rows16::repack on SIMD (the same bytes as the scalar repack; matmul repacks GGUF rows on the
// fly, compute/matmul.cpp).
using Rows16RepackKernel = void(int64_t cols, const void* src, size_t src_row_bytes, void* group);
// The Rows16::dot_pair kernels: two groups, and the memory to fetch ahead (type_traits.h).
using Rows16PairKernel = void(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                              int n_tokens, float* out, size_t out_stride, const void* next,
                              size_t next_bytes);
#if defined(__x86_64__)
extern Rows16DotKernel* const rows16_q8_0_dot_avx2;
extern Rows16DotKernel* const rows16_q8_0_dot_avx512;
extern Rows16DotKernel* const rows16_q4_k_dot_avx2;
extern Rows16DotKernel* const rows16_q4_k_dot_avx512;
extern Rows16DotKernel* const rows16_q6_k_dot_avx2;
extern Rows16DotKernel* const rows16_q6_k_dot_avx512;
extern Rows16DotKernel* const rows16_q4_0_dot_avx2;
extern Rows16DotKernel* const rows16_q4_0_dot_avx512;
extern Rows16DotKernel* const rows16_q5_k_dot_avx2;
extern Rows16DotKernel* const rows16_q5_k_dot_avx512;
// Rows16::dot_pair kernels.
extern Rows16PairKernel* const rows16_q8_0_dot_pair_avx512;
extern Rows16PairKernel* const rows16_q4_0_dot_pair_avx512;
extern Rows16PairKernel* const rows16_q4_k_dot_pair_avx512;
extern Rows16PairKernel* const rows16_q5_k_dot_pair_avx512;
extern Rows16PairKernel* const rows16_q6_k_dot_pair_avx512;
extern Rows16RepackKernel* const rows16_q8_0_repack_avx2;
extern Rows16RepackKernel* const rows16_q4_0_repack_avx2;
extern Rows16RepackKernel* const rows16_q4_k_repack_avx2;
extern Rows16RepackKernel* const rows16_q5_k_repack_avx2;
extern Rows16RepackKernel* const rows16_q6_k_repack_avx2;
extern Rows16RepackKernel* const rows16_q8_0_repack_avx512;
extern Rows16RepackKernel* const rows16_q4_0_repack_avx512;
extern Rows16RepackKernel* const rows16_q4_k_repack_avx512;
extern Rows16RepackKernel* const rows16_q5_k_repack_avx512;
extern Rows16RepackKernel* const rows16_q6_k_repack_avx512;
// Q8_0's dot_pair on AMX tiles (rows16_q8_0_amx.cpp; only where amx_usable()), and the same
// loop on a software model of the tile instructions (tests; needs AVX-512 only).
extern Rows16PairKernel* const rows16_q8_0_dot_pair_amx;
extern Rows16PairKernel* const rows16_q8_0_dot_pair_amx_model;
// Q4_0's, likewise (rows16_q8_0_amx.cpp).
extern Rows16PairKernel* const rows16_q4_0_dot_pair_amx;
extern Rows16PairKernel* const rows16_q4_0_dot_pair_amx_model;
// Q4_K's, Q5_K's and Q6_K's, likewise (rows16_k_quants_amx.cpp).
extern Rows16PairKernel* const rows16_q4_k_dot_pair_amx;
extern Rows16PairKernel* const rows16_q4_k_dot_pair_amx_model;
extern Rows16PairKernel* const rows16_q5_k_dot_pair_amx;
extern Rows16PairKernel* const rows16_q5_k_dot_pair_amx_model;
extern Rows16PairKernel* const rows16_q6_k_dot_pair_amx;
extern Rows16PairKernel* const rows16_q6_k_dot_pair_amx_model;
#endif
#if defined(__aarch64__)
extern Rows16DotKernel* const rows16_q8_0_dot_neon;
extern Rows16DotKernel* const rows16_q8_0_dot_dotprod;
extern Rows16DotKernel* const rows16_q4_k_dot_neon;
extern Rows16DotKernel* const rows16_q4_k_dot_dotprod;
extern Rows16DotKernel* const rows16_q6_k_dot_neon;
extern Rows16DotKernel* const rows16_q6_k_dot_dotprod;
extern Rows16DotKernel* const rows16_q4_0_dot_neon;
extern Rows16DotKernel* const rows16_q4_0_dot_dotprod;
extern Rows16DotKernel* const rows16_q5_k_dot_neon;
extern Rows16DotKernel* const rows16_q5_k_dot_dotprod;
#endif

}  // namespace hearth::quant
