// rope written against simd::VecF; include only from simd_kernels.inc.
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

// Heads [0, n_heads) of one token: x: (n_heads, head_dim) f32 in place. For interleaved
// pairs the duplicated cos/sin rows are built once per token, so the per-head loop is
// loads and FMAs only (duplicating per head made the shuffle port the bottleneck).
inline void rope_heads_impl(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                            int n_rot, RopeOrder order) {
  constexpr int kL = VecF::kLanes;
  constexpr int kMaxRot = 1024;
  const int n_vec = n_rot / kL * kL;  // rotated elements covered by whole vectors
  if (order == RopeOrder::kNeox || n_rot > kMaxRot || n_vec == 0) {
    for (int h = 0; h < n_heads; ++h) rope_head_impl(x + h * head_dim, cos, sin, n_rot, order);
    return;
  }
  alignas(64) float cos_dup[kMaxRot];  // (n_vec) c0 c0 c1 c1 ...
  alignas(64) float sin_dup[kMaxRot];  // (n_vec) s0 s0 s1 s1 ...
  for (int e = 0; e < n_vec; e += kL) {
    VecF::load_dup_pairs(cos + e / 2).store(cos_dup + e);
    VecF::load_dup_pairs(sin + e / 2).store(sin_dup + e);
  }
  for (int h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;  // (head_dim)
    for (int e = 0; e < n_vec; e += kL) {
      const VecF v = VecF::load(xh + e);
      fmaddsub(v, VecF::load(cos_dup + e), v.swap_pairs() * VecF::load(sin_dup + e)).store(xh + e);
    }
    for (int i = n_vec / 2; i < n_rot / 2; ++i) {
      const float a = xh[2 * i], b = xh[2 * i + 1];
      xh[2 * i] = a * cos[i] - b * sin[i];
      xh[2 * i + 1] = a * sin[i] + b * cos[i];
    }
  }
}

}  // namespace
}  // namespace hearth::compute::simd
