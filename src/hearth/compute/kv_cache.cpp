#include "hearth/compute/kv_cache.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "hearth/base/checked_math.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/half.h"
#include "hearth/compute/isa_dispatch.h"
#include "hearth/compute/kv_block_pool.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

namespace {

constexpr size_t kAlign = 64;  // one cache line: rows of different heads never share one

HugeBuffer allocate_bytes(uint64_t bytes) {
  try {
    return HugeBuffer(static_cast<size_t>(bytes));  // nothing is committed until written
  } catch (const IoError& e) {
    throw UsageError(
        fmt::format("KV cache: cannot reserve {} bytes (lower -c): {}", bytes, e.what()));
  }
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

// Rows a head takes for n positions: whole K tiles.
int64_t tile_rows(int64_t n) {
  return (n + kKTileRows - 1) / kKTileRows * kKTileRows;
}

// Bytes of K (or V) in one layer, rounded up to whole cache lines; throws UsageError on bad
// or overflowing shapes.
uint64_t layer_part_bytes(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx, KvType t) {
  if (n_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_ctx <= 0) {
    throw UsageError(fmt::format(
        "KV cache: n_layers {}, n_kv_heads {}, head_dim {} and n_ctx {} must all be > 0", n_layers,
        n_kv_heads, head_dim, n_ctx));
  }
  const auto rows = checked_mul(static_cast<uint64_t>(n_kv_heads), tile_rows(n_ctx));
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

namespace {

// Where value d of slot `slot` sits among a block-type tile's values (after its scales): a
// byte, and for q4_0 which nibble of it.
struct Place {
  int byte;
  bool high;  // q4_0: the high nibble
};
using PlaceOf = Place (*)(bool q8, int slot, int d);

// kv_cache.h "K tiles".
Place k_place(bool q8, int slot, int d) {
  const int j = slot * 2 + d % 2;  // place in its pair of dims' run
  if (q8) return {(d / 2) * 2 * kKTileRows + j, false};
  return {(d / 2) * kKTileRows + j % kKTileRows, j >= kKTileRows};
}

// kv_cache.h "V tiles".
Place v_place(bool q8, int slot, int d) {
  const int b = d / 32, e = d % 32, pair = slot / 2;
  if (q8) return {b * kKTileRows * 32 + pair * 64 + e * 2 + slot % 2, false};
  const int j = (e % 16) * 2 + slot % 2;  // place in its half block's run
  return {b * kKTileRows * 16 + pair * 32 + (e / 16) * 16 + j % 16, j >= 16};
}

// Value i of a q4_0 block: the low nibbles of its 16 bytes, then the high ones.
uint8_t q4_0_nibble(const uint8_t* block, int i) {
  return i < 16 ? block[2 + i] & 0x0f : block[2 + i - 16] >> 4;
}
uint8_t with_nibble(uint8_t byte, uint8_t nibble, bool high) {
  return high ? static_cast<uint8_t>((byte & 0x0f) | nibble << 4)
              : static_cast<uint8_t>((byte & 0xf0) | nibble);
}

// A row of a block type into (put) or out of (get) slot `slot` of a tile laid out by `place`;
// the scales are where both layouts keep them: block b of slot i at halfword b * 16 + i.
void block_tile_put(KvType t, int head_dim, const uint8_t* row, uint8_t* tile, int slot,
                    PlaceOf place) {
  const bool q8 = t == KvType::kQ8_0;
  const int n_blocks = head_dim / 32, block_bytes = q8 ? 34 : 18;
  uint8_t* values = tile + n_blocks * kKTileRows * 2;
  for (int b = 0; b < n_blocks; ++b) {
    const uint8_t* block = row + b * block_bytes;
    std::memcpy(tile + (b * kKTileRows + slot) * 2, block, 2);
    for (int i = 0; i < 32; ++i) {
      const Place at = place(q8, slot, b * 32 + i);
      values[at.byte] =
          q8 ? block[2 + i] : with_nibble(values[at.byte], q4_0_nibble(block, i), at.high);
    }
  }
}
void block_tile_get(KvType t, int head_dim, const uint8_t* tile, int slot, uint8_t* row,
                    PlaceOf place) {
  const bool q8 = t == KvType::kQ8_0;
  const int n_blocks = head_dim / 32, block_bytes = q8 ? 34 : 18;
  const uint8_t* values = tile + n_blocks * kKTileRows * 2;
  for (int b = 0; b < n_blocks; ++b) {
    uint8_t* block = row + b * block_bytes;
    std::memcpy(block, tile + (b * kKTileRows + slot) * 2, 2);
    for (int i = 0; i < 32; ++i) {
      const Place at = place(q8, slot, b * 32 + i);
      if (q8) {
        block[2 + i] = values[at.byte];
        continue;
      }
      const uint8_t nibble = at.high ? values[at.byte] >> 4 : values[at.byte] & 0x0f;
      block[2 + i % 16] = with_nibble(block[2 + i % 16], nibble, i >= 16);
    }
  }
}

}  // namespace

void k_tile_put(KvType t, int head_dim, const uint8_t* row, uint8_t* tile, int slot) {
  constexpr int kT = kKTileRows;
  switch (t) {
    case KvType::kF32:
      for (int d = 0; d < head_dim; ++d) std::memcpy(tile + (d * kT + slot) * 4, row + d * 4, 4);
      return;
    case KvType::kF16:
      for (int d = 0; d < head_dim; ++d) std::memcpy(tile + (d * kT + slot) * 2, row + d * 2, 2);
      return;
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      return block_tile_put(t, head_dim, row, tile, slot, k_place);
  }
}

void k_tile_get(KvType t, int head_dim, const uint8_t* tile, int slot, uint8_t* row) {
  constexpr int kT = kKTileRows;
  switch (t) {
    case KvType::kF32:
      for (int d = 0; d < head_dim; ++d) std::memcpy(row + d * 4, tile + (d * kT + slot) * 4, 4);
      return;
    case KvType::kF16:
      for (int d = 0; d < head_dim; ++d) std::memcpy(row + d * 2, tile + (d * kT + slot) * 2, 2);
      return;
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      return block_tile_get(t, head_dim, tile, slot, row, k_place);
  }
}

void v_tile_put(KvType t, int head_dim, const uint8_t* row, uint8_t* tile, int slot) {
  if (t == KvType::kF32 || t == KvType::kF16) {
    const uint64_t bytes = kv_row_bytes(t, head_dim);
    std::memcpy(tile + slot * bytes, row, bytes);
    return;
  }
  block_tile_put(t, head_dim, row, tile, slot, v_place);
}

void v_tile_get(KvType t, int head_dim, const uint8_t* tile, int slot, uint8_t* row) {
  if (t == KvType::kF32 || t == KvType::kF16) {
    const uint64_t bytes = kv_row_bytes(t, head_dim);
    std::memcpy(row, tile + slot * bytes, bytes);
    return;
  }
  block_tile_get(t, head_dim, tile, slot, row, v_place);
}

uint64_t KvCache::part_bytes(int n_layers, int n_kv_heads, int head_dim, int64_t rows, KvType t) {
  return layer_part_bytes(n_layers, n_kv_heads, head_dim, rows, t);
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
      head_rows_(tile_rows(n_ctx)) {
  k_bytes_ = layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.k);
  layer_stride_ = k_bytes_ + layer_part_bytes(n_layers, n_kv_heads, head_dim, n_ctx, types.v);
  k_row_bytes_ = kv_row_bytes(types.k, head_dim);
  v_row_bytes_ = kv_row_bytes(types.v, head_dim);
  data_ = allocate_bytes(layer_stride_ * static_cast<uint64_t>(n_layers));
  blocks_.assign(1, data_.data());
  length_.assign(n_layers, 0);
}

KvCache::KvCache(KvBlockPool& pool, int64_t n_ctx)
    : n_layers_(pool.n_layers()),
      n_kv_heads_(pool.n_kv_heads()),
      head_dim_(pool.head_dim()),
      n_ctx_(n_ctx),
      types_(pool.types()),
      head_rows_(pool.block_rows()),
      pool_(&pool) {
  if (n_ctx <= 0 || n_ctx > (int64_t{1} << 40)) {
    throw UsageError(fmt::format("KV cache: n_ctx {} must be in 1 .. 2^40", n_ctx));
  }
  k_bytes_ = pool.v_offset(0);
  layer_stride_ = pool.k_offset(1);
  k_row_bytes_ = kv_row_bytes(types_.k, head_dim_);
  v_row_bytes_ = kv_row_bytes(types_.v, head_dim_);
  block_shift_ = std::countr_zero(static_cast<uint64_t>(pool.block_rows()));
  length_.assign(n_layers_, 0);
}

KvCache::~KvCache() {
  release_blocks_from(0);
}

size_t KvCache::bytes() const {
  if (!paged()) return static_cast<size_t>(layer_stride_) * n_layers_;
  return block_ids_.size() * pool_->block_bytes();
}

void KvCache::check_layer(int layer) const {
  if (layer < 0 || layer >= n_layers_) {
    throw UsageError(fmt::format("KV cache: layer {} out of range [0, {})", layer, n_layers_));
  }
}

int64_t KvCache::length(int layer) const {
  check_layer(layer);
  return length_[layer];
}

int64_t KvCache::length() const {
  return *std::min_element(length_.begin(), length_.end());
}

void KvCache::release_blocks_from(size_t first) {
  if (!paged()) return;
  while (block_ids_.size() > first) {
    pool_->release(block_ids_.back());
    block_ids_.pop_back();
    blocks_.pop_back();
  }
}

void KvCache::truncate(int64_t n_pos) {
  if (n_pos < 0) throw UsageError(fmt::format("KV cache: truncate to {} < 0", n_pos));
  for (auto& len : length_) len = std::min(len, n_pos);
  if (paged()) {
    const int64_t longest = *std::max_element(length_.begin(), length_.end());
    release_blocks_from(static_cast<size_t>(pool_->blocks_for(longest)));
  }
}

int64_t KvCache::blocks_needed(int64_t pos, int64_t n_tokens) const {
  if (!paged() || n_tokens <= 0 || pos < 0) return 0;
  const int64_t first = pos >> block_shift_, last = (pos + n_tokens - 1) >> block_shift_;
  int64_t n = 0;
  for (int64_t b = first; b <= last; ++b) {
    if (b >= static_cast<int64_t>(block_ids_.size()) ||
        pool_->refs(block_ids_[static_cast<size_t>(b)]) > 1) {
      ++n;
    }
  }
  return n;
}

int64_t KvCache::blocks_owned() const {
  if (!paged()) return 0;
  return std::count_if(block_ids_.begin(), block_ids_.end(),
                       [&](int32_t id) { return pool_->refs(id) == 1; });
}

void KvCache::own_blocks(int64_t first, int64_t last) {
  for (int64_t b = first; b <= last; ++b) {
    const auto i = static_cast<size_t>(b);
    if (i >= block_ids_.size()) {  // store() allows no gap, so blocks are taken in order
      const int32_t id = pool_->acquire();
      block_ids_.push_back(id);
      blocks_.push_back(pool_->data(id));
    } else if (pool_->refs(block_ids_[i]) > 1) {
      // Shared with another cache: this one gets its own copy of every layer before writing.
      const int32_t id = pool_->acquire();
      std::memcpy(pool_->data(id), blocks_[i], pool_->block_bytes());
      pool_->release(block_ids_[i]);
      block_ids_[i] = id;
      blocks_[i] = pool_->data(id);
    }
  }
}

void KvCache::share_prefix(const KvCache& src, int64_t n_pos) {
  if (!paged() || src.pool_ != pool_) {
    throw UsageError("KV cache: prefixes are shared only between paged caches of one pool");
  }
  if (&src == this) throw UsageError("KV cache: a cache cannot share its own prefix");
  if (n_pos < 0 || n_pos > src.length() || n_pos > n_ctx_) {
    throw UsageError(
        fmt::format("KV cache: sharing {} positions of a cache holding {}", n_pos, src.length()));
  }
  release_blocks_from(0);
  const auto n_blocks = static_cast<size_t>(pool_->blocks_for(n_pos));
  for (size_t b = 0; b < n_blocks; ++b) {
    pool_->retain(src.block_ids_[b]);
    block_ids_.push_back(src.block_ids_[b]);
    blocks_.push_back(src.blocks_[b]);
  }
  length_.assign(n_layers_, n_pos);
}

KvLayerView KvCache::view(int layer) const {
  check_layer(layer);
  KvLayerView v;
  v.blocks = blocks_.data();
  v.k_offset = static_cast<int64_t>(static_cast<uint64_t>(layer) * layer_stride_);
  v.v_offset = v.k_offset + static_cast<int64_t>(k_bytes_);
  v.block_shift = block_shift_;
  v.head_rows = head_rows_;
  v.n_kv_heads = n_kv_heads_;
  v.head_dim = head_dim_;
  v.n_ctx = n_ctx_;
  v.n_pos = length_[layer];
  v.k_type = types_.k;
  v.v_type = types_.v;
  v.k_row_bytes = static_cast<int64_t>(k_row_bytes_);
  v.v_row_bytes = static_cast<int64_t>(v_row_bytes_);
  return v;
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
  if (n_tokens == 0) {
    length_[layer] = pos;
    return;
  }
  if (paged()) own_blocks(pos >> block_shift_, (pos + n_tokens - 1) >> block_shift_);
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
  const KvLayerView at = view(layer);
  // One K and one V row in their GGUF layouts, before they go into their tiles.
  std::vector<uint8_t> k_row(k_row_bytes_), v_row(v_row_bytes_);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int slot = static_cast<int>((pos + t) & (kKTileRows - 1));
    for (int h = 0; h < n_kv_heads_; ++h) {
      const int64_t src = t * row_stride + static_cast<int64_t>(h) * head_dim_;
      put(types_.k, k_row_bytes_, k + src, k_row.data());
      k_tile_put(types_.k, head_dim_, k_row.data(), const_cast<uint8_t*>(at.k_tile(h, pos + t)),
                 slot);
      put(types_.v, v_row_bytes_, v + src, v_row.data());
      v_tile_put(types_.v, head_dim_, v_row.data(), const_cast<uint8_t*>(at.v_tile(h, pos + t)),
                 slot);
    }
  }
  length_[layer] = pos + n_tokens;
}

void f32_to_f16(const float* src, uint16_t* dst, int64_t n, Isa isa) {
  HEARTH_RETURN_ISA_VARIANT(isa, f32_to_f16, src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace hearth::compute
