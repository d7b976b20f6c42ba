// The f32 SIMD vector the compute kernels are written against, the vector exp built on it,
// and the elementwise kernels (silu*mul, add, scaled add).
//
// Include ONLY from simd_kernels.inc (simd_avx2.cpp, simd_avx512.cpp) and other *_avx2.cpp /
// *_avx512.cpp files: the vector width follows the ISA flags of
// the including file (__AVX512F__ -> 16 lanes, else __AVX2__ -> 8 lanes). Everything here
// sits in an anonymous namespace so each ISA file gets its own copy; a shared inline
// symbol could otherwise be compiled for AVX-512 and picked by the linker for AVX2 callers.
#pragma once

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "activation_simd.h is for *_avx2.cpp / *_avx512.cpp files only"
#endif

#include <immintrin.h>

#include <cstdint>

namespace hearth::compute::simd {
namespace {

#if defined(__AVX512F__)

struct VecF {
  static constexpr int kLanes = 16;
  __m512 v;

  static VecF zero() { return {_mm512_setzero_ps()}; }
  static VecF set1(float x) { return {_mm512_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  // Lanes [n, kLanes) read as 0 and touch no memory.
  static VecF load_partial(const float* p, int n) {
    return {_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p)};
  }
  static VecF load_f16(const uint16_t* p) {
    return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
  }
  // (kLanes) int8 -> f32, exact.
  static VecF load_i8(const int8_t* p) {
    return {_mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))))};
  }
  // (kLanes/2) floats c0..c7 -> c0 c0 c1 c1 ... c7 c7, for the interleaved rope pairs.
  static VecF load_dup_pairs(const float* p) {
    const __m512i idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    return {_mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_loadu_ps(p)))};
  }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  void store_partial(float* p, int n) const {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  }
  // Round to nearest even, bit-exact with hearth::float_to_half.
  void store_f16(uint16_t* p) const {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // (x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...)
  VecF swap_pairs() const { return {_mm512_permute_ps(v, 0xB1)}; }
  // Lanes [n, kLanes) set to 0.
  VecF keep_first(int n) const {
    return {_mm512_maskz_mov_ps(static_cast<__mmask16>((1u << n) - 1), v)};
  }
};

inline float reduce_sum(VecF a) {
  return _mm512_reduce_add_ps(a.v);
}
inline float reduce_max(VecF a) {
  return _mm512_reduce_max_ps(a.v);
}
inline VecF round_nearest(VecF a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// 2^n for integral n in [-126, 127] given as floats.
inline VecF pow2_int(VecF n) {
  const __m512i bits =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127)), 23);
  return {_mm512_castsi512_ps(bits)};
}
// Lanes where a < b become 0.
inline VecF zero_where_less(VecF x, VecF a, VecF b) {
  return {_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ), x.v)};
}

#else  // AVX2 + FMA + F16C

struct VecF {
  static constexpr int kLanes = 8;
  __m256 v;

  static VecF zero() { return {_mm256_setzero_ps()}; }
  static VecF set1(float x) { return {_mm256_set1_ps(x)}; }
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  // Lanes [n, kLanes) read as 0 and touch no memory.
  static VecF load_partial(const float* p, int n) { return {_mm256_maskload_ps(p, tail_mask(n))}; }
  static VecF load_f16(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
  }
  // (kLanes) int8 -> f32, exact.
  static VecF load_i8(const int8_t* p) {
    return {_mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))))};
  }
  // (kLanes/2) floats c0..c3 -> c0 c0 c1 c1 c2 c2 c3 c3, for the interleaved rope pairs.
  static VecF load_dup_pairs(const float* p) {
    const __m128 c = _mm_loadu_ps(p);
    return {_mm256_set_m128(_mm_unpackhi_ps(c, c), _mm_unpacklo_ps(c, c))};
  }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  void store_partial(float* p, int n) const { _mm256_maskstore_ps(p, tail_mask(n), v); }
  // Round to nearest even, bit-exact with hearth::float_to_half.
  void store_f16(uint16_t* p) const {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  // (x0, x1, x2, x3, ...) -> (x1, x0, x3, x2, ...)
  VecF swap_pairs() const { return {_mm256_permute_ps(v, 0xB1)}; }
  // Lanes [n, kLanes) set to 0.
  VecF keep_first(int n) const { return {_mm256_and_ps(v, _mm256_castsi256_ps(tail_mask(n)))}; }

  // All-ones in lanes [0, n).
  static __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

inline float reduce_sum(VecF a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(VecF a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline VecF round_nearest(VecF a) {
  return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline VecF pow2_int(VecF n) {
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127)), 23);
  return {_mm256_castsi256_ps(bits)};
}
inline VecF zero_where_less(VecF x, VecF a, VecF b) {
  return {_mm256_and_ps(x.v, _mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ))};
}

#endif

// The arithmetic both widths spell alike but for the intrinsics' width prefix, written once:
// HEARTH_PS(add) is _mm512_add_ps or _mm256_add_ps.
#if defined(__AVX512F__)
#define HEARTH_PS(op) _mm512_##op##_ps
#else
#define HEARTH_PS(op) _mm256_##op##_ps
#endif
inline VecF operator+(VecF a, VecF b) {
  return {HEARTH_PS(add)(a.v, b.v)};
}
inline VecF operator-(VecF a, VecF b) {
  return {HEARTH_PS(sub)(a.v, b.v)};
}
inline VecF operator*(VecF a, VecF b) {
  return {HEARTH_PS(mul)(a.v, b.v)};
}
inline VecF operator/(VecF a, VecF b) {
  return {HEARTH_PS(div)(a.v, b.v)};
}
inline VecF vmax(VecF a, VecF b) {
  return {HEARTH_PS(max)(a.v, b.v)};
}
inline VecF vabs(VecF a) {
  return {HEARTH_PS(andnot)(HEARTH_PS(set1)(-0.0f), a.v)};
}
inline VecF vmin(VecF a, VecF b) {
  return {HEARTH_PS(min)(a.v, b.v)};
}
// a * b + c
inline VecF fma(VecF a, VecF b, VecF c) {
  return {HEARTH_PS(fmadd)(a.v, b.v, c.v)};
}
// c - a * b
inline VecF fnma(VecF a, VecF b, VecF c) {
  return {HEARTH_PS(fnmadd)(a.v, b.v, c.v)};
}
// even lanes a * b - c, odd lanes a * b + c
inline VecF fmaddsub(VecF a, VecF b, VecF c) {
  return {HEARTH_PS(fmaddsub)(a.v, b.v, c.v)};
}
#undef HEARTH_PS

// exp(x) with relative error below 2e-7 for x in [-87.3, 88]; 0 below (also for -inf),
// exp(88) above. Range reduction x = n ln2 + r, |r| <= ln2/2, with ln2 split in a part
// exact in float and a small remainder so n * ln2_hi has no rounding error; then the
// Taylor series of e^r to degree 7, whose truncation error (ln2/2)^8 / 8! < 6e-9 is below
// float resolution.
inline VecF vexp(VecF x) {
  const VecF lo = VecF::set1(-87.33f);  // exp(-87.33) is about the smallest normal float
  const VecF xc = vmin(vmax(x, lo), VecF::set1(88.0f));
  const VecF n = round_nearest(xc * VecF::set1(1.44269504088896341f));  // log2(e)
  VecF r = fnma(n, VecF::set1(0.693359375f), xc);                       // ln2_hi
  r = fnma(n, VecF::set1(-2.12194440e-4f), r);                          // ln2 - ln2_hi
  VecF p = VecF::set1(1.0f / 5040.0f);
  p = fma(p, r, VecF::set1(1.0f / 720.0f));
  p = fma(p, r, VecF::set1(1.0f / 120.0f));
  p = fma(p, r, VecF::set1(1.0f / 24.0f));
  p = fma(p, r, VecF::set1(1.0f / 6.0f));
  p = fma(p, r, VecF::set1(0.5f));
  p = fma(p, r, VecF::set1(1.0f));
  p = fma(p, r, VecF::set1(1.0f));
  return zero_where_less(p * pow2_int(n), x, lo);
}

// out = gate * sigmoid(gate) * up = gate * up / (1 + exp(-gate)); out may alias either.
inline void silu_mul_impl(const float* gate, const float* up, float* out, int64_t n) {
  const VecF one = VecF::set1(1.0f);
  const VecF zero = VecF::zero();
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) {
    const VecF g = VecF::load(gate + i);
    ((g * VecF::load(up + i)) / (one + vexp(zero - g))).store(out + i);
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    const VecF g = VecF::load_partial(gate + i, rest);
    ((g * VecF::load_partial(up + i, rest)) / (one + vexp(zero - g))).store_partial(out + i, rest);
  }
}

// out = a + b; out may alias either.
inline void add_impl(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) {
    (VecF::load(a + i) + VecF::load(b + i)).store(out + i);
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    (VecF::load_partial(a + i, rest) + VecF::load_partial(b + i, rest))
        .store_partial(out + i, rest);
  }
}

// y += s * x
inline void add_scaled_impl(float* y, const float* x, float s, int64_t n) {
  const VecF vs = VecF::set1(s);
  int64_t i = 0;
  for (; i + VecF::kLanes <= n; i += VecF::kLanes) {
    fma(vs, VecF::load(x + i), VecF::load(y + i)).store(y + i);
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    fma(vs, VecF::load_partial(x + i, rest), VecF::load_partial(y + i, rest))
        .store_partial(y + i, rest);
  }
}

}  // namespace
}  // namespace hearth::compute::simd
