// Small helpers shared by the rows16 kernel files. Everything has internal linkage (unnamed
// namespace): the files are compiled with different ISA flags, and an inline function with
// external linkage would let the linker keep, say, the AVX-512 build for every caller.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hearth/quant/block_formats.h"
#include "hearth/quant/type_traits.h"

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
// itself it hoists a loop's prefetches into one burst per loop, which streamed slower
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
// The kernel files export a pointer to it (rows16_kernels.h). Kept out of line so each kernel
// is one function of its own: inlined into a caller with all four token counts, the Q4_K AVX2
// matvec streamed measurably slower.
template <typename K>
[[gnu::noinline]] void rows16_dot(int64_t cols, const void* group, const void* acts,
                                  size_t act_stride, int n_tokens, float* out, size_t out_stride) {
  rows16_by_tokens(n_tokens, [&](auto nt) {
    K::template run<decltype(nt)::value>(cols, static_cast<const uint8_t*>(group),
                                         static_cast<const uint8_t*>(acts), act_stride, out,
                                         out_stride);
  });
}

// Rows16::group_bytes and Rows16::act_bytes of a layout L (rows16_kernels.h).
template <typename L>
size_t rows16_group_bytes(int64_t cols) {
  return static_cast<size_t>(cols / L::kBlockCols) * L::kBlockBytes;
}

template <typename L>
size_t rows16_act_bytes(int64_t cols) {
  return static_cast<size_t>(cols / L::kBlockCols) * L::kActBlockBytes;
}

// Row r of GGUF rows row_bytes apart, as an array of blocks B (what repack reads and unpack
// writes).
template <typename B>
const B* rows16_row(const void* rows, int r, size_t row_bytes) {
  return reinterpret_cast<const B*>(static_cast<const uint8_t*>(rows) +
                                    static_cast<size_t>(r) * row_bytes);
}

template <typename B>
B* rows16_row(void* rows, int r, size_t row_bytes) {
  return reinterpret_cast<B*>(static_cast<uint8_t*>(rows) + static_cast<size_t>(r) * row_bytes);
}

// Rows16::repack of a layout L from GGUF blocks B: pack(b, g, r) writes every byte of row r's
// share of the group's block column g from the row's GGUF block b.
template <typename L, typename B, void (*pack)(const B& b, uint8_t* g, int r)>
void rows16_repack(int64_t cols, const void* src, size_t src_row_bytes, void* group) {
  auto* g = static_cast<uint8_t*>(group);
  for (int64_t i = 0; i < cols / L::kBlockCols; ++i, g += L::kBlockBytes) {
    for (int r = 0; r < kRows16; ++r) pack(rows16_row<B>(src, r, src_row_bytes)[i], g, r);
  }
}

// Rows16::unpack, the inverse: unpack(g, r, b) writes row r's GGUF block b back from g.
template <typename L, typename B, void (*unpack)(const uint8_t* g, int r, B& b)>
void rows16_unpack(int64_t cols, const void* group, void* dst, size_t dst_row_bytes) {
  const auto* g = static_cast<const uint8_t*>(group);
  for (int64_t i = 0; i < cols / L::kBlockCols; ++i, g += L::kBlockBytes) {
    for (int r = 0; r < kRows16; ++r) unpack(g, r, rows16_row<B>(dst, r, dst_row_bytes)[i]);
  }
}

// Rows16::prepare_act of a K-quant layout L from a Q8_K row: per super-block, f32 d and 12
// zero bytes, then what sums(block, out + 16) writes, then the 256 quants at the end.
template <typename L, typename Sums>
void rows16_prepare_q8_k(int64_t cols, const void* act_row, void* dst, Sums sums) {
  const auto* a = static_cast<const BlockQ8_K*>(act_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < cols / kQKK; ++i, out += L::kActBlockBytes) {
    std::memset(out, 0, 16);
    std::memcpy(out, &a[i].d, 4);
    sums(a[i], out + 16);
    std::memcpy(out + L::kActBlockBytes - kQKK, a[i].qs, kQKK);
  }
}

// The scalar Rows16::dot of a layout L, one row and token at a time: acc = block(g, r, ab, acc)
// over the block columns g of the group in order, ab being the token's prepared activation
// block; acc starts at 0.
template <typename L, float (*block)(const uint8_t* g, int r, const uint8_t* ab, float acc)>
void rows16_scalar_dot(int64_t cols, const void* group, const void* acts, size_t act_stride,
                       int n_tokens, float* out, size_t out_stride) {
  for (int t = 0; t < n_tokens; ++t) {
    const uint8_t* act = static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride;
    for (int r = 0; r < kRows16; ++r) {
      const uint8_t* g = static_cast<const uint8_t*>(group);
      float acc = 0;
      for (int64_t b = 0; b < cols / L::kBlockCols; ++b, g += L::kBlockBytes) {
        acc = block(g, r, act + static_cast<size_t>(b) * L::kActBlockBytes, acc);
      }
      out[static_cast<size_t>(t) * out_stride + static_cast<size_t>(r)] = acc;
    }
  }
}

// The scalar Rows16 of a layout L over GGUF blocks B from its per-block pieces (see
// rows16_repack, rows16_unpack and rows16_scalar_dot) and its prepare_act.
template <typename L, typename B, void (*pack)(const B&, uint8_t*, int),
          void (*unpack)(const uint8_t*, int, B&),
          void (*prepare_act)(int64_t cols, const void* act_row, void* dst),
          float (*block)(const uint8_t* g, int r, const uint8_t* ab, float acc)>
constexpr Rows16 rows16_scalar() {
  return {rows16_group_bytes<L>,
          rows16_repack<L, B, pack>,
          rows16_unpack<L, B, unpack>,
          rows16_act_bytes<L>,
          prepare_act,
          rows16_scalar_dot<L, block>};
}

}  // namespace
}  // namespace hearth::quant
