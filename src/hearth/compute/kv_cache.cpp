#include "hearth/compute/kv_cache.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "hearth/base/checked_math.h"
#include "hearth/base/error.h"
#include "hearth/base/half.h"

namespace hearth::compute {

namespace {

constexpr size_t kAlign = 64;  // one cache line: rows of different heads never share one

uint16_t* allocate_halves(size_t n_elems) {
  const auto bytes = checked_align_up(static_cast<uint64_t>(n_elems) * sizeof(uint16_t), kAlign);
  // std::aligned_alloc leaves the memory untouched, so only written pages get committed.
  void* p = bytes ? std::aligned_alloc(kAlign, *bytes) : nullptr;
  if (p == nullptr) {
    throw UsageError(
        fmt::format("KV cache: cannot allocate {} bytes (lower -c)", n_elems * sizeof(uint16_t)));
  }
  return static_cast<uint16_t*>(p);
}

// Elements of K (or V) in one layer; throws UsageError on bad or overflowing shapes.
uint64_t layer_elems(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx) {
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_ctx <= 0) {
    throw UsageError(fmt::format(
        "KV cache: n_layers {}, n_kv_heads {}, head_dim {} and n_ctx {} must all be > 0", n_layers,
        n_kv_heads, head_dim, n_ctx));
  }
  const auto per_layer = checked_mul(static_cast<uint64_t>(n_kv_heads) * head_dim, n_ctx);
  const auto total = per_layer ? checked_mul(*per_layer, 2ull * n_layers) : std::nullopt;
  if (!total || *total > (1ull << 62) / sizeof(uint16_t)) {
    throw UsageError(fmt::format("KV cache: n_ctx {} makes the cache size overflow", n_ctx));
  }
  return *per_layer;
}

}  // namespace

uint64_t KvCache::bytes_for(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx) {
  return layer_elems(n_layers, n_kv_heads, head_dim, n_ctx) * 2 * n_layers * sizeof(uint16_t);
}

KvCache::KvCache(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      n_ctx_(n_ctx),
      data_(nullptr, &std::free) {
  n_elems_layer_ = layer_elems(n_layers, n_kv_heads, head_dim, n_ctx);
  n_elems_total_ = n_elems_layer_ * 2 * n_layers;
  data_.reset(allocate_halves(n_elems_total_));
  length_.assign(n_layers, 0);
}

void KvCache::check_layer(int layer) const {
  if (layer < 0 || layer >= n_layers_) {
    throw UsageError(fmt::format("KV cache: layer {} out of range [0, {})", layer, n_layers_));
  }
}

uint16_t* KvCache::k_data(int layer) {
  check_layer(layer);
  return data_.get() + 2 * static_cast<size_t>(layer) * n_elems_layer_;
}

uint16_t* KvCache::v_data(int layer) {
  return k_data(layer) + n_elems_layer_;
}

int64_t KvCache::length(int layer) const {
  check_layer(layer);
  return length_[layer];
}

int64_t KvCache::length() const {
  return *std::min_element(length_.begin(), length_.end());
}

void KvCache::truncate(int64_t n_pos) {
  if (n_pos < 0) throw UsageError(fmt::format("KV cache: truncate to {} < 0", n_pos));
  for (auto& len : length_) len = std::min(len, n_pos);
}

KvLayerView KvCache::view(int layer) const {
  check_layer(layer);
  const uint16_t* k = data_.get() + 2 * static_cast<size_t>(layer) * n_elems_layer_;
  return KvLayerView{k, k + n_elems_layer_, n_kv_heads_, head_dim_, n_ctx_, length_[layer]};
}

void KvCache::store(int layer, int64_t pos, int64_t n_tokens, const float* k, const float* v,
                    int64_t row_stride, Isa isa) {
  check_layer(layer);
  const int64_t row = static_cast<int64_t>(n_kv_heads_) * head_dim_;
  if (row_stride == 0) row_stride = row;
  if (row_stride < row) {
    throw UsageError(
        fmt::format("KV cache: row_stride {} < n_kv_heads * head_dim {}", row_stride, row));
  }
  if (pos < 0 || n_tokens < 0) {
    throw UsageError(fmt::format("KV cache: store at position {} of {} tokens", pos, n_tokens));
  }
  if (pos > length_[layer]) {
    throw UsageError(
        fmt::format("KV cache layer {}: store at position {} would leave a gap after length {}",
                    layer, pos, length_[layer]));
  }
  if (n_tokens > n_ctx_ - pos) {
    throw UsageError(fmt::format(
        "KV cache: context full: position {} >= n_ctx {} (raise -c or truncate the cache)",
        pos + n_tokens - 1, n_ctx_));
  }
  uint16_t* kd = k_data(layer);  // (n_kv_heads, n_ctx, head_dim) f16
  uint16_t* vd = kd + n_elems_layer_;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_kv_heads_; ++h) {
      const int64_t src = t * row_stride + static_cast<int64_t>(h) * head_dim_;
      const int64_t dst = (static_cast<int64_t>(h) * n_ctx_ + pos + t) * head_dim_;
      f32_to_f16(k + src, kd + dst, head_dim_, isa);
      f32_to_f16(v + src, vd + dst, head_dim_, isa);
    }
  }
  length_[layer] = pos + n_tokens;
}

void f32_to_f16(const float* src, uint16_t* dst, int64_t n, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::kAvx512) return detail::f32_to_f16_avx512(src, dst, n);
  if (isa == Isa::kAvx2) return detail::f32_to_f16_avx2(src, dst, n);
#endif
  (void)isa;
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace hearth::compute
