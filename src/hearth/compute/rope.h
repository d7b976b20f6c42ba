// Rotary position embedding (RoPE) for q and k rows.
//
// For pair i (0 <= i < n_rot/2) of a head at position pos the angle is
//   theta_i = pos * freq_scale * base^(-2i / n_rot) / factor[i]
// (factor = Llama 3 `rope_freqs`, 1 when absent), and the pair (a, b) becomes
//   (a cos - b sin, a sin + b cos).
// kNormal (llama) pairs elements (2i, 2i+1); kNeox (qwen2) pairs (i, i + n_rot/2).
// Elements [n_rot, head_dim) pass through (partial rotary); n_rot = head_dim for Llama/Qwen2.
//
// cos/sin are computed once per token position by RopeTable (in double, then rounded), and
// shared by every layer and head: a decode step costs n_rot/2 sincos, not n_layers times that.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hearth/compute/ops.h"

namespace hearth::compute {

enum class RopeOrder { kNormal, kNeox };

struct RopeConfig {
  int head_dim = 0;
  int n_rot = 0;  // rotated dims, even, <= head_dim; 0 means head_dim
  float base = 10000.0f;
  float freq_scale = 1.0f;  // linear position scaling (1 / rope scale factor)
  RopeOrder order = RopeOrder::kNormal;
  std::vector<float> freq_factors;  // (n_rot/2) f32 divisors of theta, or empty
};

class RopeTable {
 public:
  // Throws UsageError for an odd or out-of-range n_rot, base <= 0, a factor count other
  // than n_rot/2, or a factor <= 0.
  explicit RopeTable(RopeConfig config);

  const RopeConfig& config() const { return config_; }
  int n_rot() const { return config_.n_rot; }

  // Fills cos/sin for token t = 0..positions.size()-1 at positions[t] (positions >= 0).
  // Overwrites the previous fill. Not thread-safe; rope() calls after it are.
  void compute(std::span<const int64_t> positions);
  // Positions pos0 .. pos0 + n_tokens - 1.
  void compute_range(int64_t pos0, int64_t n_tokens);

  int64_t n_tokens() const { return n_tokens_; }
  const float* cos(int64_t t) const { return cos_.data() + t * (config_.n_rot / 2); }  // (n_rot/2)
  const float* sin(int64_t t) const { return sin_.data() + t * (config_.n_rot / 2); }  // (n_rot/2)

 private:
  void resize(int64_t n_tokens);
  void fill(int64_t t, int64_t pos);  // cos/sin of token t at position pos

  RopeConfig config_;
  std::vector<double> inv_freq_;  // (n_rot/2) f64: freq_scale * base^(-2i/n_rot) / factor[i]
  int64_t n_tokens_ = 0;
  std::vector<float> cos_;  // (n_tokens, n_rot/2) f32
  std::vector<float> sin_;  // (n_tokens, n_rot/2) f32
};

// Rotates heads [0, n_heads) of tokens [t_begin, t_end) in place, token t using the
// table's entry t. x: token t's row starts at x + t * token_stride and holds
// (n_heads, head_dim) f32 contiguous; token_stride >= n_heads * head_dim lets q or k live
// inside a fused qkv buffer. Throws UsageError when t_end > table.n_tokens().
void rope(float* x, int64_t t_begin, int64_t t_end, int n_heads, int64_t token_stride,
          const RopeTable& table, Isa isa = active_isa());

namespace ref {
// Rotates one head row x: (head_dim) f32 with cos, sin: (n_rot/2) f32.
void rope_head(float* x, const float* cos, const float* sin, int n_rot, RopeOrder order);
}  // namespace ref

namespace detail {
// All heads of one token: x: (n_heads, head_dim) f32; cos, sin: (n_rot/2) f32.
void rope_heads_avx2(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                     int n_rot, RopeOrder order);
void rope_heads_avx512(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                       int n_rot, RopeOrder order);
}  // namespace detail

}  // namespace hearth::compute
