// vpdpbusd on a zeroed accumulator, for the AVX-512 VNNI kernel files.
#pragma once

#if !defined(__AVX512VNNI__)
#error "dpbusd_from_zero.h is for the AVX-512 VNNI kernel files only"
#endif

#include <immintrin.h>

namespace hearth::quant {
namespace {

// _mm512_dpbusd_epi32(zero, u8, s8) with the zeroing written out, so that it stays the
// `vpxord` idiom, which the renamer handles without an execution port. Left to itself, GCC 12
// keeps one zero register and copies it into every accumulator first: a move that takes one
// of the vector slots the decode kernels are bound by.
[[gnu::always_inline]] inline __m512i dpbusd_from_zero(__m512i u8, __m512i s8) {
  __m512i z;
  asm volatile("vpxord %0, %0, %0" : "=v"(z));
  return _mm512_dpbusd_epi32(z, u8, s8);
}

}  // namespace
}  // namespace hearth::quant
