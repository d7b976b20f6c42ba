// Small helpers shared by the rows16 kernel files. Everything has internal linkage (unnamed
// namespace): the files are compiled with different ISA flags, and an inline function with
// external linkage would let the linker keep, say, the AVX-512 build for every caller.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hearth/base/half.h"
#include "hearth/quant/block_formats.h"
#include "hearth/quant/block_steps.h"
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
// The same into L2 (prefetcht1), for a second, longer distance beside the first.
template <typename V>
inline void rows16_prefetch_l2_beside(V& v, const uint8_t* ahead) {
  asm volatile("prefetcht1 (%1)" : "+v"(v) : "r"(ahead));
}
#endif

// Calls fn(std::integral_constant<int, N>) with N = n_tokens (1..kMax; any other count
// takes kMax), so kernels can keep one accumulator set per token in registers.
template <int kMax, int N = 1, typename Fn>
inline void rows16_by_tokens(int n_tokens, Fn&& fn) {
  if constexpr (N == kMax) {
    fn(std::integral_constant<int, N>{});
  } else if (n_tokens == N) {
    fn(std::integral_constant<int, N>{});
  } else {
    rows16_by_tokens<kMax, N + 1>(n_tokens, fn);
  }
}

// Tokens a kernel struct K takes per pass over the weights: K::kMaxTokens (4 or 8) if it
// declares one, else 4. More tokens per pass share each decoded weight vector among more
// vpdpbusd; only kernels with registers to spare and decode work to share gain from 8.
template <typename K>
constexpr int rows16_max_tokens() {
  if constexpr (requires { K::kMaxTokens; }) {
    return K::kMaxTokens;
  } else {
    return 4;
  }
}

// Calls fn(t, nt, pass, passes) for each pass of a kernel struct K over n_tokens tokens: the
// pass takes tokens [t, t + nt), nt a std::integral_constant. Tokens beyond the kernel's
// rows16_max_tokens take further passes, as even as the count allows (16 tokens at 3 a pass
// are 3, 3, 3, 3, 2, 2, not five 3s and a 1: a short pass decodes the weights for few tokens).
template <typename K, typename Fn>
inline void rows16_for_passes(int n_tokens, Fn&& fn) {
  constexpr int kMax = rows16_max_tokens<K>();
  const int passes = (n_tokens + kMax - 1) / kMax;
  for (int i = 0, t = 0; i < passes; ++i) {
    // The first n_tokens % passes passes take one token more than the rest.
    const int n = n_tokens / passes + (i < n_tokens % passes ? 1 : 0);
    rows16_by_tokens<kMax>(n, [&](auto nt) { fn(t, nt, i, passes); });
    t += n;
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
  rows16_for_passes<K>(n_tokens, [&](int t, auto nt, int, int) {
    K::template run<decltype(nt)::value>(
        cols, static_cast<const uint8_t*>(group),
        static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride, act_stride,
        out + static_cast<size_t>(t) * out_stride, out_stride);
  });
}

// Memory a pair kernel fetches ahead into L2: `lines` 64-byte lines from `at` (none by default).
struct Rows16Ahead {
  const uint8_t* at = nullptr;
  int64_t lines = 0;

  // Rows16::dot_pair's next and next_bytes.
  static Rows16Ahead of(const void* next, size_t next_bytes) {
    if (next == nullptr) return {};
    return {static_cast<const uint8_t*>(next), static_cast<int64_t>((next_bytes + 63) / 64)};
  }
  // Part i of n, the lines dealt out as evenly as their count allows.
  Rows16Ahead part(int64_t i, int64_t n) const {
    if (lines == 0) return {};
    const int64_t l0 = lines * i / n, l1 = lines * (i + 1) / n;
    return {at + 64 * l0, l1 - l0};
  }
};

// The Rows16::dot_pair entry for a pair kernel struct K, whose run takes one more argument,
// the Rows16Ahead to fetch during the pass: next_bytes at next, dealt out over the passes.
template <typename K>
[[gnu::noinline]] void rows16_dot_pair(int64_t cols, const void* groups, const void* acts,
                                       size_t act_stride, int n_tokens, float* out,
                                       size_t out_stride, const void* next, size_t next_bytes) {
  const Rows16Ahead ahead = Rows16Ahead::of(next, next_bytes);
  rows16_for_passes<K>(n_tokens, [&](int t, auto nt, int pass, int passes) {
    K::template run<decltype(nt)::value>(
        cols, static_cast<const uint8_t*>(groups),
        static_cast<const uint8_t*>(acts) + static_cast<size_t>(t) * act_stride, act_stride,
        out + static_cast<size_t>(t) * out_stride, out_stride, ahead.part(pass, passes));
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

// The SIMD repacks' start of block column i: b[r] = row r's block i, and each row's fp16 d
// copied to g + 2r, where every rows16 layout keeps it.
template <typename B>
void rows16_column_blocks(const void* src, size_t src_row_bytes, int64_t i, uint8_t* g,
                          const B* (&b)[kRows16]) {
  for (int r = 0; r < kRows16; ++r) {
    b[r] = rows16_row<B>(src, r, src_row_bytes) + i;
    std::memcpy(g + 2 * static_cast<size_t>(r), &b[r]->d, 2);
  }
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

// Rows16::prepare_act of a layout L over 32-element blocks from a Q8_0 row: per block, f32 d,
// i32 offset * sum(q), then the 32 quants. The weight quants' offset (their stored value minus
// the one they stand for) moves into the activation: sum((q_w - o) * q_a) = sum(q_w * q_a)
// - o * sum(q_a), one integer per block.
template <typename L>
void rows16_prepare_q8_0(int64_t cols, const void* act_row, void* dst, int32_t offset) {
  const auto* a = static_cast<const BlockQ8_0*>(act_row);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < cols / kQK0; ++b, out += L::kActBlockBytes) {
    const float d = half_to_float(a[b].d);
    int32_t sum = 0;
    for (int e = 0; e < kQK0; ++e) sum += a[b].qs[e];
    const int32_t corr = offset * sum;
    std::memcpy(out, &d, 4);
    std::memcpy(out + 4, &corr, 4);
    std::memcpy(out + 8, a[b].qs, kQK0);
  }
}

// One block column's step of the scalar kernel of a layout over 32-element blocks whose
// activation rows16_prepare_q8_0 prepares, for row r and one token (ab: its prepared
// activation block): isum = the block's correction + quant_sum(g, r, quants), exact, then
// acc = fma(d_w * d_a, float(isum), acc) (q8_0_block_step).
template <int32_t (*quant_sum)(const uint8_t* g, int r, const int8_t* aq)>
float rows16_q8_0_block_dot(const uint8_t* g, int r, const uint8_t* ab, float acc) {
  float da;
  int32_t isum;
  std::memcpy(&da, ab, 4);
  std::memcpy(&isum, ab + 4, 4);
  isum += quant_sum(g, r, reinterpret_cast<const int8_t*>(ab + 8));
  uint16_t dw;
  std::memcpy(&dw, g + 2 * r, 2);
  return q8_0_block_step(acc, half_to_float(dw), da, isum);
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

// Q4_K and Q5_K share their header and the arrangement of the low 4 bits (at kQuants in a
// block column: rows16_kernels.h), their activation and their sums; Q5_K adds the high bits.

// Row r's d, dmin, scales and mins in a Q4_K / Q5_K group block column g (rows16_kernels.h).
template <typename B>
void rows16_pack_q4_k_header(const B& b, uint8_t* g, int r) {
  std::memcpy(g + 2 * r, &b.d, 2);
  std::memcpy(g + 32 + 2 * r, &b.dmin, 2);
  uint8_t sc[8], m[8];
  unpack_q4k_scales(b.scales, sc, m);
  for (int j = 0; j < 8; ++j) g[64 + 16 * j + r] = sc[j];
  for (int p = 0; p < 4; ++p) {
    g[192 + 32 * p + 2 * r] = m[2 * p];
    g[192 + 32 * p + 2 * r + 1] = m[2 * p + 1];
  }
}

// Row r's Q5_K high-bit bytes (at kHighBits) in group block column g from GGUF's qh (layout
// in rows16_kernels.h). Matmul repacks GGUF rows on the fly (compute/matmul.cpp): the byte of
// element i of slice quad c of pair p gathers bits 2p and 2p + 1 of qh byte 4 (4c + s) + i into
// bits 2s and 2s + 1. The four bytes i < 4 go at once, one per byte of a word (the shifts move no
// bit into a neighbour byte that the mask keeps).
template <int kHighBits>
void rows16_pack_q5_k_high_bits(const uint8_t* qh, uint8_t* g, int r) {
  for (int p = 0; p < 4; ++p) {
    for (int c = 0; c < 2; ++c) {
      uint32_t out = 0;
      for (int s = 0; s < 4; ++s) {
        uint32_t from;
        std::memcpy(&from, qh + 4 * (4 * c + s), 4);
        out |= ((from >> (2 * p)) & 0x03030303u) << (2 * s);
      }
      std::memcpy(g + kHighBits + 128 * p + 64 * c + 4 * r, &out, 4);
    }
  }
}

// Q5_K's five-bit bytes (layout in rows16_kernels.h), from (mix) or back to (unmix) the
// arrangement it shares with Q4_K, low 4 bits of sub-blocks 2p and 2p + 1 in one byte and
// both fifth bits in the high-bit vectors, for bytes i in [i0, i1) of every 64-byte slice of
// group block column g (four per row: rows16_pack_q5_k_high_bits's rows go one at a time).
// Per element, with k = 2(s % 4): the quant byte keeps bits 0-3, takes sub-block 2p's fifth
// bit (high-bit bit k) into bit 4 and 2p + 1's bits 0-2 (its bits 4-6) into bits 5-7; bit k
// takes 2p + 1's bit 3 (its bit 7), and bit k + 1, 2p + 1's fifth bit, stays.
template <int kQuants, int kHighBits, typename F>
void rows16_q5_k_each_byte(uint8_t* g, int i0, int i1, F f) {
  for (int p = 0; p < 4; ++p) {
    for (int s = 0; s < 8; ++s) {
      uint8_t* q = g + kQuants + 512 * p + 64 * s;
      uint8_t* h = g + kHighBits + 128 * p + 64 * (s / 4);
      for (int i = i0; i < i1; ++i) f(q[i], h[i], 2 * (s % 4));
    }
  }
}

template <int kQuants, int kHighBits>
void rows16_mix_q5_k(uint8_t* g, int i0, int i1) {
  rows16_q5_k_each_byte<kQuants, kHighBits>(g, i0, i1, [](uint8_t& q, uint8_t& h, int k) {
    const int qi = q, hi = h;
    q = static_cast<uint8_t>((qi & 0x0f) | (((hi >> k) & 1) << 4) | ((qi << 1) & 0xe0));
    h = static_cast<uint8_t>((hi & ~(1 << k)) | ((qi >> 7) << k));
  });
}

template <int kQuants, int kHighBits>
void rows16_unmix_q5_k(uint8_t* g, int i0, int i1) {
  rows16_q5_k_each_byte<kQuants, kHighBits>(g, i0, i1, [](uint8_t& q, uint8_t& h, int k) {
    const int qi = q, hi = h;
    q = static_cast<uint8_t>((qi & 0x0f) | ((qi >> 1) & 0x70) | (((hi >> k) & 1) << 7));
    h = static_cast<uint8_t>((hi & ~(1 << k)) | (((qi >> 4) & 1) << k));
  });
}

// Writes (pack) or reads back (unpack) row r's d, dmin, scales, mins and low 4 bits of a
// Q4_K or Q5_K block b in the group block column g.
template <int kQuants, typename B>
void rows16_pack_q4_k_part(const B& b, uint8_t* g, int r) {
  rows16_pack_q4_k_header(b, g, r);
  for (int p = 0; p < 4; ++p) {
    for (int s = 0; s < 8; ++s)
      std::memcpy(g + kQuants + 512 * p + 64 * s + 4 * r, b.qs + 32 * p + 4 * s, 4);
  }
}

template <int kQuants, typename B>
void rows16_unpack_q4_k_part(const uint8_t* g, int r, B& b) {
  std::memcpy(&b.d, g + 2 * r, 2);
  std::memcpy(&b.dmin, g + 32 + 2 * r, 2);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) sc[j] = g[64 + 16 * j + r];
  for (int p = 0; p < 4; ++p) {
    m[2 * p] = g[192 + 32 * p + 2 * r];
    m[2 * p + 1] = g[192 + 32 * p + 2 * r + 1];
    for (int s = 0; s < 8; ++s)
      std::memcpy(b.qs + 32 * p + 4 * s, g + kQuants + 512 * p + 64 * s + 4 * r, 4);
  }
  pack_q4k_scales(sc, m, b.scales);
}

// Rows16::prepare_act of Q4_K and Q5_K: per super-block the Q8_K row's d, its sub-block sums
// (int16 each: |sum| <= 32 * 127) and its quants.
template <typename L>
void rows16_prepare_q4_k(int64_t cols, const void* act_row, void* dst) {
  rows16_prepare_q8_k<L>(cols, act_row, dst, [](const BlockQ8_K& a, uint8_t* sums) {
    for (int j = 0; j < 8; ++j) {
      const auto bsum = static_cast<int16_t>(a.bsums[2 * j] + a.bsums[2 * j + 1]);
      std::memcpy(sums + 2 * j, &bsum, 2);
    }
  });
}

// One block column's step of the scalar Q4_K (kHighBits < 0) or Q5_K kernel for row r and
// one token (ab: its prepared activation block).
template <int kQuants, int kHighBits>
float rows16_q4_k_block_dot(const uint8_t* g, int r, const uint8_t* ab, float acc) {
  const auto* aq = reinterpret_cast<const int8_t*>(ab + 32);
  int32_t s1 = 0, s2 = 0;
  for (int j = 0; j < 8; ++j) {
    const int p = j / 2, shift = 4 * (j % 2);
    int32_t isum = 0;
    for (int e = 0; e < 32; ++e) {
      const int at = 64 * (e / 4) + 4 * r + e % 4;
      const int byte = g[kQuants + 512 * p + at];
      int q;
      if constexpr (kHighBits >= 0) {
        // Five-bit bytes (rows16_mix_q5_k): sub-block 2p whole in bits 0-4; 2p + 1's bits
        // 0-2 in bits 5-7 and 3-4 in its slice's two bits of the quad's high-bit byte.
        const int s = e / 4;
        const int hb = g[kHighBits + 128 * p + 64 * (s / 4) + 4 * r + e % 4];
        q = j % 2 == 0 ? byte & 0x1f : (byte >> 5) | (((hb >> (2 * (s % 4))) & 3) << 3);
      } else {
        q = (byte >> shift) & 0x0f;
      }
      isum += q * aq[32 * j + e];
    }
    s1 += g[64 + 16 * j + r] * isum;
    int16_t bsum;
    std::memcpy(&bsum, ab + 16 + 2 * j, 2);
    s2 += g[192 + 32 * p + 2 * r + j % 2] * bsum;
  }
  float da;
  std::memcpy(&da, ab, 4);
  uint16_t dh, dmh;
  std::memcpy(&dh, g + 2 * r, 2);
  std::memcpy(&dmh, g + 32 + 2 * r, 2);
  return k_block_step(acc, half_to_float(dh), half_to_float(dmh), da, s1, s2);
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
          rows16_scalar_dot<L, block>,
          nullptr};  // dot_pair: the scalar kernel has none
}

}  // namespace
}  // namespace hearth::quant
