// The loop every rows16 x86 kernel (rows16_*_avx2.cpp, rows16_*_avx512.cpp) shares, and the
// lanes it works in. A kernel file writes only what is its own: the constants it needs and
// `block`, the products of one block column of the 16-row group against NT tokens' activation
// blocks. Include only from those files: the lanes follow the including file's ISA flags
// (__AVX512F__: one 16-lane zmm per 16 rows; else two 8-lane ymm halves, rows 0-7 and 8-15),
// and everything sits in an unnamed namespace so each file gets its own copy (an inline
// function with external linkage could let the linker keep the AVX-512 build for AVX2 callers).
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "rows16_x86.h is for the rows16 AVX2 / AVX-512 kernel files only"
#endif

#include <immintrin.h>

#include "hearth/quant/rows16_common.h"
#include "hearth/quant/stream_tuning.h"

namespace hearth::quant {
namespace {

#if defined(__AVX512F__)
struct Rows16Lanes {
  static constexpr int kHalves = 1;
  using F = __m512;
  using I = __m512i;
  static F zero() { return _mm512_setzero_ps(); }
  // The 16 rows' fp16 values at p (the group's per-row scales).
  static F f16(const uint8_t* p, int /*half*/) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F fma_scaled(F w, float a, I isum, F acc) {
    return _mm512_fmadd_ps(_mm512_mul_ps(w, _mm512_set1_ps(a)), _mm512_cvtepi32_ps(isum), acc);
  }
  static F fnma_scaled(F w, float a, I isum, F acc) {
    return _mm512_fnmadd_ps(_mm512_mul_ps(w, _mm512_set1_ps(a)), _mm512_cvtepi32_ps(isum), acc);
  }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static void store(float* out, const F (&v)[kHalves]) { _mm512_storeu_ps(out, v[0]); }
  // Half h of the rows at out + 16h: here one half, all 16 rows (h = 0).
  static void store_half(float* out, const F (&v)[kHalves], int half) {
    _mm512_storeu_ps(out + 16 * half, v[half]);
  }
};
#else
struct Rows16Lanes {
  static constexpr int kHalves = 2;
  using F = __m256;
  using I = __m256i;
  static F zero() { return _mm256_setzero_ps(); }
  // Half h (rows 8h .. 8h + 7) of the 16 rows' fp16 values at p.
  static F f16(const uint8_t* p, int half) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * half)));
  }
  static F fma_scaled(F w, float a, I isum, F acc) {
    return _mm256_fmadd_ps(_mm256_mul_ps(w, _mm256_set1_ps(a)), _mm256_cvtepi32_ps(isum), acc);
  }
  static F fnma_scaled(F w, float a, I isum, F acc) {
    return _mm256_fnmadd_ps(_mm256_mul_ps(w, _mm256_set1_ps(a)), _mm256_cvtepi32_ps(isum), acc);
  }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static void store(float* out, const F (&v)[kHalves]) {
    _mm256_storeu_ps(out, v[0]);
    _mm256_storeu_ps(out + 8, v[1]);
  }
  // Half h of the rows (8h .. 8h + 7) at out + 8h.
  static void store_half(float* out, const F (&v)[kHalves], int half) {
    _mm256_storeu_ps(out + 8 * half, v[half]);
  }
};
#endif

// Keeps v's sum a chain as written: GCC 12 regroups a loop's chain of integer vector adds
// into a tree for parallelism, which holds every product at once, and on AVX2's 16 registers
// spills them to the stack (the AVX2 kernels' sums, after each add).
template <typename V>
[[gnu::always_inline]] inline void rows16_keep_chain(V& v) {
  asm("" : "+v"(v));
}

// The halves (rows 0-7, 8-15) an AVX2 kernel's block<NT, H> covers: H = 0 or 1 alone, or both
// (kRows16BothHalves). Rows16Blocks runs multi-token passes one half at a time: with both, NT
// tokens' sums and float accumulators of 16 rows took 4 NT of AVX2's 16 registers and the
// kernels spilled them to the stack every slice; decode (one token) keeps both halves in one
// pass, which reads each weight line once.
constexpr int kRows16BothHalves = 2;
template <int H>
struct Rows16Halves {
  static constexpr int kBegin = H == kRows16BothHalves ? 0 : H;
  static constexpr int kEnd = H == kRows16BothHalves ? Rows16Lanes::kHalves : H + 1;
};

// Writes a weight vector just loaded to the stack, where nothing reads it back, when the
// kernel runs for one token (decode). The AVX-512 kernels call it once per loaded vector: on
// the AMD EPYC they were tuned on, their matvecs streamed faster side by side with these
// stores than without; with more tokens per call the kernels are bound by arithmetic, where
// the stores made them slower (docs/kernels.md, "Stores beside the loads"). The AVX2 kernels
// gained nothing from them, so they do not call it.
template <int NT, typename V>
[[gnu::always_inline]] inline void rows16_store_beside(const V& v) {
  if constexpr (NT == 1) asm volatile("" : : "m"(v));
}

// NT tokens' float sums of the 16 rows, kept in registers across the whole group.
template <int NT>
using Rows16Acc = Rows16Lanes::F[NT][Rows16Lanes::kHalves];

// NT tokens' prepared activation blocks for the block column at hand.
template <int NT>
using Rows16Acts = const uint8_t* const (&)[NT];

template <int NT>
[[gnu::always_inline]] inline void rows16_zero(Rows16Acc<NT>& v) {
  for (int t = 0; t < NT; ++t) {
    for (int h = 0; h < Rows16Lanes::kHalves; ++h) v[t][h] = Rows16Lanes::zero();
  }
}

// After block column b of n_blocks in Q4_0's quads (block_steps.h): at a quad's end (its fourth
// block column or the row's last) acc += q, and q starts again from +0.
template <int NT, int H = kRows16BothHalves>
[[gnu::always_inline]] inline void rows16_end_quad(int64_t b, int64_t n_blocks, Rows16Acc<NT>& q,
                                                   Rows16Acc<NT>& acc) {
  if (b % 4 != 3 && b + 1 != n_blocks) return;
  for (int t = 0; t < NT; ++t) {
    for (int h = Rows16Halves<H>::kBegin; h < Rows16Halves<H>::kEnd; ++h) {
      acc[t][h] = Rows16Lanes::add(acc[t][h], q[t][h]);
      q[t][h] = Rows16Lanes::zero();
    }
  }
}

// Rows16 kernel K of layout L: K is constructed once per call (its vector constants stay in
// registers) and K::block<NT>(g, ab, acc) adds block column g's products against the tokens'
// activation blocks ab[0..NT) into acc, for NT up to rows16_max_tokens<K>(). block must
// be always-inline: the compiler then sees one loop per token count, as if written out by
// hand, and keeps acc in registers.
//
// A kernel that declares kBlockQuads (Q4_0) takes its float steps in quads of block columns
// (block_steps.h): block then adds into the quad's sums q, which start at +0 with each quad
// and, after its fourth block column or the row's last, are added into acc (rows16_end_quad).
template <typename K, typename L>
struct Rows16Blocks {
  static constexpr int kMaxTokens = rows16_max_tokens<K>();
  static constexpr bool kQuads = requires { K::kBlockQuads; };
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride) {
    if constexpr (Rows16Lanes::kHalves == 1 || NT == 1) {
      pass<NT, kRows16BothHalves>(cols, g, act, act_stride, out, out_stride);
    } else {
      pass<NT, 0>(cols, g, act, act_stride, out, out_stride);
      pass<NT, 1>(cols, g, act, act_stride, out, out_stride);
    }
  }

  // One pass over the row for halves H (Rows16Halves; all of them on AVX-512).
  template <int NT, int H>
  static void pass(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride,
                   float* out, size_t out_stride) {
    const K kernel;
    Rows16Acc<NT> acc, q;
    rows16_zero<NT>(acc);
    rows16_zero<NT>(q);
    const int64_t n_blocks = cols / L::kBlockCols;
    for (int64_t b = 0; b < n_blocks; ++b, g += L::kBlockBytes) {
      const uint8_t* ab[NT];
      for (int t = 0; t < NT; ++t) {
        ab[t] =
            act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
      }
      if constexpr (kQuads) {
        block<NT, H>(kernel, g, ab, q);
        rows16_end_quad<NT, H>(b, n_blocks, q, acc);
      } else {
        block<NT, H>(kernel, g, ab, acc);
      }
    }
    for (int t = 0; t < NT; ++t) {
      for (int h = Rows16Halves<H>::kBegin; h < Rows16Halves<H>::kEnd; ++h)
        Rows16Lanes::store_half(out + static_cast<size_t>(t) * out_stride, acc[t], h);
    }
  }

  // The AVX-512 kernels' block<NT> covers all 16 rows in one zmm; the AVX2 ones take the
  // halves as block<NT, H>.
  template <int NT, int H>
  [[gnu::always_inline]] static void block(const K& kernel, const uint8_t* g, Rows16Acts<NT> ab,
                                           Rows16Acc<NT>& acc) {
    if constexpr (Rows16Lanes::kHalves == 1) {
      kernel.template block<NT>(g, ab, acc);
    } else {
      kernel.template block<NT, H>(g, ab, acc);
    }
  }
};

// Fetches the lines of a Rows16Ahead into L2 over a loop of n_blocks block columns, the same
// number each (one more for the first lines % n_blocks): matmul's next pair of groups, so that
// its first pass does not wait on DRAM, as it did for a large share of a short matmul's time.
// Fetching it in bursts between kernel calls recovered much less than spreading it
// (docs/kernels.md, "The next pair fetched ahead").
class Rows16FetchAhead {
 public:
  Rows16FetchAhead(Rows16Ahead ahead, int64_t n_blocks)
      : at_(ahead.at), each_(ahead.lines / n_blocks), extra_(ahead.lines % n_blocks) {}
  [[gnu::always_inline]] void block(int64_t b) {
    const int64_t n = each_ + (b < extra_ ? 1 : 0);
    for (int64_t l = 0; l < n; ++l, at_ += 64)
      _mm_prefetch(reinterpret_cast<const char*>(at_), _MM_HINT_T1);
  }

 private:
  const uint8_t* at_;
  const int64_t each_, extra_;
};

// Rows16Blocks for two adjacent groups at once (Rows16::dot_pair): K::block_pair<NT>(g0, g1,
// ab, acc0, acc1) adds block column g0 of the first group and g1 of the second into acc0 and
// acc1, for NT up to K::kPairTokens. Each lane runs block's steps, so each group gets dot's
// bits; what changes is that one activation broadcast in a register feeds both groups'
// vpdpbusd.
// Meanwhile it fetches `ahead` into L2 (rows16_dot_pair deals it out), a few lines per block
// column.
template <typename K, typename L>
struct Rows16PairBlocks {
  static constexpr int kMaxTokens = K::kPairTokens;
  static constexpr bool kQuads = requires { K::kBlockQuads; };
  template <int NT>
  static void run(int64_t cols, const uint8_t* g, const uint8_t* act, size_t act_stride, float* out,
                  size_t out_stride, Rows16Ahead ahead) {
    const K kernel;
    Rows16Acc<NT> acc0, acc1, q0, q1;  // q0, q1: the quads' sums (kBlockQuads, Rows16Blocks)
    rows16_zero<NT>(acc0);
    rows16_zero<NT>(acc1);
    rows16_zero<NT>(q0);
    rows16_zero<NT>(q1);
    const int64_t n_blocks = cols / L::kBlockCols;
    const size_t group_bytes = static_cast<size_t>(n_blocks) * L::kBlockBytes;
    Rows16FetchAhead fetch(ahead, n_blocks);
    for (int64_t b = 0; b < n_blocks; ++b, g += L::kBlockBytes) {
      const uint8_t* ab[NT];
      for (int t = 0; t < NT; ++t) {
        ab[t] =
            act + static_cast<size_t>(t) * act_stride + static_cast<size_t>(b) * L::kActBlockBytes;
      }
      fetch.block(b);
      if constexpr (kQuads) {
        kernel.template block_pair<NT>(g, g + group_bytes, ab, q0, q1);
        rows16_end_quad<NT>(b, n_blocks, q0, acc0);
        rows16_end_quad<NT>(b, n_blocks, q1, acc1);
      } else {
        kernel.template block_pair<NT>(g, g + group_bytes, ab, acc0, acc1);
      }
    }
    for (int t = 0; t < NT; ++t) {
      Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride, acc0[t]);
      Rows16Lanes::store(out + static_cast<size_t>(t) * out_stride + kRows16, acc1[t]);
    }
  }
};

// The 16 x 16 transpose of bytes: byte r of out[c] = byte c of x[r] (unpacks of 8-, 16-, 32-
// and 64-bit units, 64 shuffles). The repacks put 16 rows' per-row bytes (scales) together
// with it.
inline void rows16_transpose_bytes(const __m128i (&x)[16], __m128i (&out)[16]) {
  __m128i a[16], b[16], c[16];
  for (int k = 0; k < 8; ++k) {  // a[k]: columns 0-7 of rows 2k, 2k + 1 in 16-bit units
    a[k] = _mm_unpacklo_epi8(x[2 * k], x[2 * k + 1]);
    a[8 + k] = _mm_unpackhi_epi8(x[2 * k], x[2 * k + 1]);  // columns 8-15
  }
  for (int h = 0; h < 2; ++h) {  // b[8h + 2q]: columns 8h .. 8h + 3 of rows 4q .. 4q + 3
    for (int q = 0; q < 4; ++q) {
      b[8 * h + 2 * q] = _mm_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
      b[8 * h + 2 * q + 1] = _mm_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
    }
  }
  for (int h = 0; h < 2; ++h) {  // c[8h + 4o + 2e + k]: columns 8h + 4k + 2e, +1 of rows 8o..+7
    for (int o = 0; o < 2; ++o) {
      for (int k = 0; k < 2; ++k) {
        const __m128i lo = b[8 * h + 4 * o + k], hi = b[8 * h + 4 * o + 2 + k];
        c[8 * h + 4 * o + k] = _mm_unpacklo_epi32(lo, hi);
        c[8 * h + 4 * o + 2 + k] = _mm_unpackhi_epi32(lo, hi);
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 2; ++k) {
      for (int e = 0; e < 2; ++e) {  // columns 8h + 4k + 2e and + 1, all 16 rows
        const __m128i lo = c[8 * h + 2 * e + k], hi = c[8 * h + 4 + 2 * e + k];
        out[8 * h + 4 * k + 2 * e] = _mm_unpacklo_epi64(lo, hi);
        out[8 * h + 4 * k + 2 * e + 1] = _mm_unpackhi_epi64(lo, hi);
      }
    }
  }
}

// Q4_K / Q5_K's scales and mins of the 16 rows into a block column g (rows16_kernels.h), from
// each row's 8 scales and 8 mins as bytes (x[r]: scales in bytes 0-7, mins in 8-15): a byte
// transpose puts each scale's 16 rows together at 64 + 16j, and each pair of mins' rows
// interleaved at 192 + 32p. The SIMD Q4_K / Q5_K repacks end with it.
inline void rows16_store_q4_k_scales(const __m128i (&x)[16], uint8_t* g) {
  __m128i t[16];
  rows16_transpose_bytes(x, t);
  for (int j = 0; j < 8; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 64 + 16 * j), t[j]);
  for (int p = 0; p < 4; ++p) {  // (m[2p], m[2p + 1]) of row r at 192 + 32p + 2r
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 192 + 32 * p),
                     _mm_unpacklo_epi8(t[8 + 2 * p], t[9 + 2 * p]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g + 192 + 32 * p + 16),
                     _mm_unpackhi_epi8(t[8 + 2 * p], t[9 + 2 * p]));
  }
}

// The 8 x 8 transpose of 32-bit lanes: lane r of out[m] = lane m of v[r] (unpacks of 32- and
// 64-bit units within 128-bit halves, then a swap of halves: 24 shuffles). The AVX2 repacks
// turn 8 rows' vectors of 4-byte units into a half (rows 0-7 or 8-15) of the layout's vectors
// with it, as rows16_transpose does for all 16 rows on AVX-512.
inline void rows16_transpose8(const __m256i (&v)[8], __m256i (&out)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {  // per 128-bit half: (a0 b0 a1 b1), (a2 b2 a3 b3)
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int j = 0; j < 2; ++j) {  // u[4j + e], half c: element 4c + e of rows 4j .. 4j + 3
    u[4 * j] = _mm256_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 1] = _mm256_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 2] = _mm256_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    u[4 * j + 3] = _mm256_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // rows 0-3 and 4-7 of elements e (low halves) and 4 + e
    out[e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x20);
    out[4 + e] = _mm256_permute2x128_si256(u[e], u[4 + e], 0x31);
  }
}

#if defined(__AVX512F__)
// Sub-blocks 2p and 2p + 1 of a Q5_K slice s, as bytes 0..31, from its 64-byte load v of
// five-bit bytes and h, the slice quad's high bits (rows16_kernels.h): sub-block 2p is bits
// 0-4; 2p + 1 takes bits 5-7 shifted down, and its bits 3-4 from h, where they sit at bits
// 2(s % 4) and 2(s % 4) + 1: an immediate 16-bit shift brings them to bits 3 and 4, a mask
// keeps those two, and a vpternlogd puts them over the shifted byte's bits 3-7 (which the
// shift filled from the neighbouring byte). Five ops per load, none on the vpdpbusd pipes
// (docs/kernels.md, "Two groups per pass").
[[gnu::always_inline]] inline void rows16_q5_k_decode_pair(__m512i v, __m512i h, int s, __m512i& lo,
                                                           __m512i& hi) {
  const int at = 2 * (s % 4);
  const __m512i h3 = at < 3 ? _mm512_slli_epi16(h, 3 - at) : _mm512_srli_epi16(h, at - 3);
  lo = _mm512_and_si512(v, _mm512_set1_epi8(0x1f));
  // low3 ? v >> 5 : h3 & 0x18, bitwise (truth table 0xE4: the selector last, so that
  // vpternlogd overwrites the shifted byte, which dies here, not a copy of low3)
  hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 5),
                                 _mm512_and_si512(h3, _mm512_set1_epi8(0x18)),
                                 _mm512_set1_epi8(0x07), 0xE4);
}

// The four 4-element sets of a Q6_K 16-element group, as bytes 0..63, from its three vectors
// (rows16_kernels.h): sets 1-3 are the low 6 bits; set 4 gathers the top two bits of each
// vector (the 16-bit shifts bring in a neighbour byte's bits above the ones kept). The
// vpternlogd selects (truth table 0xE4) take the selector last: it overwrites its first
// operand, so with a value that dies there no copy of the constant is made.
[[gnu::always_inline]] inline void rows16_q6_k_decode(__m512i v0, __m512i v1, __m512i v2,
                                                      __m512i (&q)[4]) {
  const __m512i six = _mm512_set1_epi8(0x3f);
  q[0] = _mm512_and_si512(v0, six);
  q[1] = _mm512_and_si512(v1, six);
  q[2] = _mm512_and_si512(v2, six);
  // (low2 ? v0 >> 6 : v1 >> 4), then (low4 ? that : v2 >> 2), bitwise
  const __m512i v01 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v0, 6), _mm512_srli_epi16(v1, 4),
                                                _mm512_set1_epi8(0x03), 0xE4);
  q[3] = _mm512_and_si512(
      _mm512_ternarylogic_epi32(v01, _mm512_srli_epi16(v2, 2), _mm512_set1_epi8(0x0f), 0xE4), six);
}

// A token's offset correction (rows16_prepare_q8_0) in every lane: where the Q8_0 / Q4_0
// kernels' vpdpbusd chains start.
[[gnu::always_inline]] inline __m512i rows16_q8_0_corr(const uint8_t* act_block) {
  return _mm512_set1_epi32(rows16_load_i32(act_block + 4));
}

// The end of block_pair for the layouts whose activation blocks rows16_prepare_q8_0 makes
// (Q8_0, Q4_0: the token's scale, then its offset correction): each group's exact integer
// sums s0 / s1, the correction already in them, scaled into acc0 / acc1 as block does (for
// Q4_0 these are the quads' sums). The VNNI pair kernels start their chains from the
// correction (rows16_q8_0_corr), which saves an add per group and token where the vector
// ports are the bound (Intel's two 512-bit ports); the AMX tiles' signed weights put it in.
template <int NT>
[[gnu::always_inline]] inline void rows16_q8_0_pair_scale(
    const uint8_t* g0, const uint8_t* g1, Rows16Acts<NT> ab, const __m512i (&s0)[NT],
    const __m512i (&s1)[NT], Rows16Acc<NT>& acc0, Rows16Acc<NT>& acc1) {
  const __m512 dw0 = Rows16Lanes::f16(g0, 0);
  const __m512 dw1 = Rows16Lanes::f16(g1, 0);
  for (int t = 0; t < NT; ++t) {
    const float da = rows16_load_f32(ab[t]);
    acc0[t][0] = Rows16Lanes::fma_scaled(dw0, da, s0[t], acc0[t][0]);
    acc1[t][0] = Rows16Lanes::fma_scaled(dw1, da, s1[t], acc1[t][0]);
  }
}

// acc += v, written into acc's register. The pair kernels keep sums across a loop that GCC 12
// does not unroll, and for `acc = _mm512_add_epi32(acc, v)` it wrote the sum into v's register
// and copied it back each turn: a move per sum that takes a vector slot, where the Q6_K pair
// kernel's slots are what bound it (docs/kernels.md, "Two groups per pass").
[[gnu::always_inline]] inline void rows16_add_in_place(__m512i& acc, __m512i v) {
  asm("vpaddd %1, %0, %0" : "+v"(acc) : "v"(v));
}

// The 16 x 16 transpose of 32-bit lanes: lane r of out[m] = lane m of v[r]. A SIMD repack
// builds each row's 4-byte units in the lanes of a vector and turns 16 rows' vectors into the
// layout's vectors (one row per lane) with it: 64 shuffles for 16 vectors.
inline void rows16_transpose(const __m512i (&v)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {  // per 128-bit chunk: (a0 b0 a1 b1), (a2 b2 a3 b3)
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int j = 0; j < 4; ++j) {  // u[4j + e], chunk c: element 4c + e of rows 4j .. 4j + 3
    u[4 * j] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  for (int e = 0; e < 4; ++e) {  // chunk c of the four row quads -> out[4c + e]
    const __m512i w0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88);       // chunks 0, 2
    const __m512i w1 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xdd);       // chunks 1, 3
    const __m512i w2 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88);  // of rows 8-15
    const __m512i w3 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xdd);
    out[e] = _mm512_shuffle_i32x4(w0, w2, 0x88);
    out[8 + e] = _mm512_shuffle_i32x4(w0, w2, 0xdd);
    out[4 + e] = _mm512_shuffle_i32x4(w1, w3, 0x88);
    out[12 + e] = _mm512_shuffle_i32x4(w1, w3, 0xdd);
  }
}
#endif

// The Rows16::dot entry of a kernel built once per prefetch table (stream_tuning.h), its
// distances template arguments: Zen4Kernel or Zen5Kernel by the table in use. A distance held
// in a register instead streamed measurably slower than a constant.
template <typename Zen4Kernel, typename Zen5Kernel>
void rows16_dot_tuned(int64_t cols, const void* group, const void* acts, size_t act_stride,
                      int n_tokens, float* out, size_t out_stride) {
  if (stream_tuning().cpu == StreamCpu::kZen5) {
    rows16_dot<Zen5Kernel>(cols, group, acts, act_stride, n_tokens, out, out_stride);
  } else {
    rows16_dot<Zen4Kernel>(cols, group, acts, act_stride, n_tokens, out, out_stride);
  }
}

}  // namespace
}  // namespace hearth::quant
