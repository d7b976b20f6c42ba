#include "hearth/compute/kv_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "hearth/base/checked_math.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/half.h"
#include "hearth/compute/isa_dispatch.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

namespace {

constexpr size_t kAlign = 64;  // one cache line: rows of different heads never share one

uint8_t* allocate_bytes(uint64_t bytes) {
  // std::aligned_alloc leaves the memory untouched, so only written pages get committed.
  void* p = bytes ? std::aligned_alloc(kAlign, bytes) : nullptr;
  if (p == nullptr) {
    throw UsageError(fmt::format("KV cache: cannot allocate {} bytes (lower -c)", bytes));
  }
  return static_cast<uint8_t*>(p);
}

gguf::TensorType tensor_type(KvType t) {
  switch (t) {
    case KvType::kF32:
      return gguf::TensorType::kF32;
    case KvType::kF16:
      return gguf::TensorType::kF16;
    case KvType::kQ8_0:
      return gguf::TensorType::kQ8_0;
    case KvType::kQ4_0:
      return gguf::TensorType::kQ4_0;
  }
  return gguf::TensorType::kF16;
}

// Bytes of K (or V) in one layer, rounded up to whole cache lines; throws UsageError on bad
// or overflowing shapes.
uint64_t layer_part_bytes(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx, KvType t) {
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_ctx <= 0) {
    throw UsageError(fmt::format(
        "KV cache: n_layers {}, n_kv_heads {}, head_dim {} and n_ctx {} must all be > 0", n_layers,
        n_kv_heads, head_dim, n_ctx));
  }
  const auto rows = checked_mul(static_cast<uint64_t>(n_kv_heads), n_ctx);
  const auto bytes = rows ? checked_mul(*rows, kv_row_bytes(t, head_dim)) : std::nullopt;
  const auto aligned = bytes ? checked_align_up(*bytes, kAlign) : std::nullopt;
  const auto total = aligned ? checked_mul(*aligned, 2ull * n_layers) : std::nullopt;
  if (!total || *total > (1ull << 62)) {
    throw UsageError(fmt::format("KV cache: n_ctx {} makes the cache size overflow", n_ctx));
  }
  return *aligned;
}

constexpr EnumName<KvType> kKvTypeNames[] = {
    {KvType::kF32, "f32"}, {KvType::kF16, "f16"}, {KvType::kQ8_0, "q8_0"}, {KvType::kQ4_0, "q4_0"}};

}  // namespace

KvType parse_kv_type(const std::string& text, const std::string& what) {
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (auto t = enum_from_name(kKvTypeNames, lower)) return *t;
  return parse_enum(kKvTypeNames, text, what);  // throws, naming the flag and the choices
}

const char* kv_type_name(KvType t) {
  return enum_name(kKvTypeNames, t).data();
}

bool kv_type_fits(KvType t, int head_dim) {
  if (head_dim <= 0) return false;
  return t == KvType::kF32 || t == KvType::kF16 || head_dim % 32 == 0;
}

uint64_t kv_row_bytes(KvType t, int head_dim) {
  if (!kv_type_fits(t, head_dim)) {
    throw UsageError(fmt::format(
        "KV cache type {} stores blocks of 32 values; this model's head_dim {} is not a multiple "
        "of 32 (use f16 or f32)",
        kv_type_name(t), head_dim));
  }
  const uint64_t n = static_cast<uint64_t>(head_dim);
  switch (t) {
    case KvType::kF32:
      return 4 * n;
    case KvType::kF16:
      return 2 * n;
    case KvType::kQ8_0:
      return n / 32 * 34;
    case KvType::kQ4_0:
      return n / 32 * 18;
  }
  return 2 * n;
}

uint64_t KvTypes::bytes_per_token(int n_kv_heads, int head_dim) const {
  return static_cast<uint64_t>(n_kv_heads) *
         (kv_row_bytes(k, head_dim) + kv_row_bytes(v, head_dim));
}

KvRowToFloat kv_row_converter(KvType t) {
  return quant::traits(tensor_type(t)).to_float;
}

void kv_row_to_float(KvType t, const uint8_t* row, int head_dim, float* dst) {
  kv_row_converter(t)(row, dst, head_dim);
}

uint64_t KvCache::bytes_for(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx,
                            KvTypes types) {
  return (layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.k) +
          layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.v)) *
         static_cast<uint64_t>(n_layers);
}

KvCache::KvCache(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx, KvTypes types)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      n_ctx_(n_ctx),
      types_(types),
      data_(nullptr, &std::free) {
  k_bytes_ = layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.k);
  layer_stride_ = k_bytes_ + layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.v);
  k_row_bytes_ = kv_row_bytes(types.k, head_dim);
  v_row_bytes_ = kv_row_bytes(types.v, head_dim);
  data_.reset(allocate_bytes(static_cast<uint64_t>(layer_stride_) * n_layers));
  length_.assign(n_layers, 0);
}

void KvCache::check_layer(int layer) const {
  if (layer < 0 || layer >= n_layers_) {
    throw UsageError(fmt::format("KV cache: layer {} out of range [0, {})", layer, n_layers_));
  }
}

uint8_t* KvCache::k_data(int layer) {
  check_layer(layer);
  return data_.get() + static_cast<size_t>(layer) * layer_stride_;
}

uint8_t* KvCache::v_data(int layer) {
  return k_data(layer) + k_bytes_;
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
  const uint8_t* k = data_.get() + static_cast<size_t>(layer) * layer_stride_;
  return KvLayerView{k,
                     k + k_bytes_,
                     n_kv_heads_,
                     head_dim_,
                     n_ctx_,
                     length_[layer],
                     types_.k,
                     types_.v,
                     static_cast<int64_t>(k_row_bytes_),
                     static_cast<int64_t>(v_row_bytes_)};
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
  uint8_t* kd = k_data(layer);  // (n_kv_heads, n_ctx) rows of types_.k
  uint8_t* vd = v_data(layer);
  auto put = [&](KvType type, uint64_t row_bytes, const float* src, uint8_t* dst) {
    switch (type) {
      case KvType::kF32:
        std::memcpy(dst, src, row_bytes);
        break;
      case KvType::kF16:
        f32_to_f16(src, reinterpret_cast<uint16_t*>(dst), head_dim_, isa);
        break;
      default:
        quant::traits(tensor_type(type)).quantize(src, dst, head_dim_);
        break;
    }
  };
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_kv_heads_; ++h) {
      const int64_t src = t * row_stride + static_cast<int64_t>(h) * head_dim_;
      const int64_t row = static_cast<int64_t>(h) * n_ctx_ + pos + t;
      put(types_.k, k_row_bytes_, k + src, kd + row * k_row_bytes_);
      put(types_.v, v_row_bytes_, v + src, vd + row * v_row_bytes_);
    }
  }
  length_[layer] = pos + n_tokens;
}

void f32_to_f16(const float* src, uint16_t* dst, int64_t n, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, f32_to_f16, src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace hearth::compute
