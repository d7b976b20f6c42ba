#include "hearth/compute/rope.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "hearth/base/error.h"

namespace hearth::compute {

RopeTable::RopeTable(RopeConfig config) : config_(std::move(config)) {
  if (config_.n_rot == 0) config_.n_rot = config_.head_dim;
  if (config_.head_dim <= 0 || config_.n_rot <= 0 || config_.n_rot > config_.head_dim ||
      config_.n_rot % 2 != 0) {
    throw UsageError(fmt::format("rope: n_rot {} must be even and in [2, head_dim {}]",
                                 config_.n_rot, config_.head_dim));
  }
  if (!(config_.base > 0.0f) || !(config_.freq_scale > 0.0f)) {
    throw UsageError(fmt::format("rope: base {} and freq_scale {} must be > 0", config_.base,
                                 config_.freq_scale));
  }
  const int half = config_.n_rot / 2;
  if (!config_.freq_factors.empty() && static_cast<int>(config_.freq_factors.size()) != half) {
    throw UsageError(fmt::format("rope: rope_freqs has {} factors, expected n_rot/2 = {}",
                                 config_.freq_factors.size(), half));
  }
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    double f =
        config_.freq_scale * std::pow(static_cast<double>(config_.base), -2.0 * i / config_.n_rot);
    if (!config_.freq_factors.empty()) {
      const float factor = config_.freq_factors[i];
      if (!(factor > 0.0f) || !std::isfinite(factor)) {
        throw UsageError(
            fmt::format("rope: rope_freqs[{}] = {} must be finite and > 0", i, factor));
      }
      f /= factor;
    }
    inv_freq_[i] = f;
  }
}

void RopeTable::resize(int64_t n_tokens) {
  const size_t half = config_.n_rot / 2;
  n_tokens_ = n_tokens;
  cos_.resize(n_tokens * half);  // no reallocation unless the batch grew
  sin_.resize(n_tokens * half);
}

void RopeTable::fill(int64_t t, int64_t pos) {
  if (pos < 0) throw UsageError(fmt::format("rope: position {} < 0", pos));
  const int half = config_.n_rot / 2;
  // Angles in double: pos * inv_freq reaches 1e5 rad at long contexts, where a float
  // angle would already be off by ~0.01 rad.
  const double p = static_cast<double>(pos);
  for (int i = 0; i < half; ++i) {
    const double theta = p * inv_freq_[i];
    cos_[t * half + i] = static_cast<float>(std::cos(theta));
    sin_[t * half + i] = static_cast<float>(std::sin(theta));
  }
}

void RopeTable::compute(std::span<const int64_t> positions) {
  resize(static_cast<int64_t>(positions.size()));
  for (int64_t t = 0; t < n_tokens_; ++t) fill(t, positions[t]);
}

void RopeTable::compute_range(int64_t pos0, int64_t n_tokens) {
  if (n_tokens < 0) throw UsageError(fmt::format("rope: {} tokens", n_tokens));
  resize(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) fill(t, pos0 + t);
}

void ref::rope_head(float* x, const float* cos, const float* sin, int n_rot, RopeOrder order) {
  const int half = n_rot / 2;
  for (int i = 0; i < half; ++i) {
    // kNormal rotates (x[2i], x[2i+1]); kNeox rotates (x[i], x[i + half]).
    float& a = order == RopeOrder::kNormal ? x[2 * i] : x[i];
    float& b = order == RopeOrder::kNormal ? x[2 * i + 1] : x[i + half];
    const float a0 = a, b0 = b;
    a = a0 * cos[i] - b0 * sin[i];
    b = a0 * sin[i] + b0 * cos[i];
  }
}

void rope(float* x, int64_t t_begin, int64_t t_end, int n_heads, int64_t token_stride,
          const RopeTable& table, Isa isa) {
  const int head_dim = table.config().head_dim;
  if (t_begin < 0 || t_end < t_begin || t_end > table.n_tokens()) {
    throw UsageError(fmt::format("rope: tokens [{}, {}) outside the table's {} positions", t_begin,
                                 t_end, table.n_tokens()));
  }
  if (n_heads < 0 || token_stride < static_cast<int64_t>(n_heads) * head_dim) {
    throw UsageError(fmt::format("rope: token_stride {} < n_heads {} * head_dim {}", token_stride,
                                 n_heads, head_dim));
  }
  const RopeOrder order = table.config().order;
  for (int64_t t = t_begin; t < t_end; ++t) {
    float* row = x + t * token_stride;  // (n_heads, head_dim)
#if defined(__x86_64__)
    if (isa == Isa::kAvx512) {
      detail::rope_heads_avx512(row, n_heads, head_dim, table.cos(t), table.sin(t), table.n_rot(),
                                order);
      continue;
    }
    if (isa == Isa::kAvx2) {
      detail::rope_heads_avx2(row, n_heads, head_dim, table.cos(t), table.sin(t), table.n_rot(),
                              order);
      continue;
    }
#endif
    for (int h = 0; h < n_heads; ++h) {
      ref::rope_head(row + static_cast<int64_t>(h) * head_dim, table.cos(t), table.sin(t),
                     table.n_rot(), order);
    }
  }
  (void)isa;
}

}  // namespace hearth::compute
