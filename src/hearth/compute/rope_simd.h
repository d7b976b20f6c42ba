// rope written against simd::VecF; include only from rope_avx2.cpp / rope_avx512.cpp.
#pragma once

#include "hearth/compute/activation_simd.h"
#include "hearth/compute/rope.h"

namespace hearth::compute::simd {
namespace {

// x: (head_dim) f32 in place; cos, sin: (n_rot/2) f32.
inline void rope_head_impl(float* x, const float* cos, const float* sin, int n_rot,
                           RopeOrder order) {
  constexpr int kL = VecF::kLanes;
  const int half = n_rot / 2;
  int i = 0;  // pair index
  if (order == RopeOrder::kNeox) {
    float* lo = x;         // (half) first elements of the pairs
    float* hi = x + half;  // (half) second elements
    for (; i + kL <= half; i += kL) {
      const VecF a = VecF::load(lo + i), b = VecF::load(hi + i);
      const VecF c = VecF::load(cos + i), s = VecF::load(sin + i);
      fnma(b, s, a * c).store(lo + i);
      fma(a, s, b * c).store(hi + i);
    }
    if (i < half) {
      const int n = half - i;
      const VecF a = VecF::load_partial(lo + i, n), b = VecF::load_partial(hi + i, n);
      const VecF c = VecF::load_partial(cos + i, n), s = VecF::load_partial(sin + i, n);
      fnma(b, s, a * c).store_partial(lo + i, n);
      fma(a, s, b * c).store_partial(hi + i, n);
    }
    return;
  }
  // Interleaved pairs: one vector holds kL/2 pairs (a0 b0 a1 b1 ...). With c and s
  // duplicated per pair, even lanes need a c - b s and odd lanes b c + a s:
  // fmaddsub(x, c, swap_pairs(x) * s).
  for (; i + kL / 2 <= half; i += kL / 2) {
    const VecF v = VecF::load(x + 2 * i);
    const VecF c = VecF::load_dup_pairs(cos + i), s = VecF::load_dup_pairs(sin + i);
    fmaddsub(v, c, v.swap_pairs() * s).store(x + 2 * i);
  }
  for (; i < half; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = a * cos[i] - b * sin[i];
    x[2 * i + 1] = a * sin[i] + b * cos[i];
  }
}

}  // namespace
}  // namespace hearth::compute::simd
