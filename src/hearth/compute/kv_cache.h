// The key/value cache of one sequence: per layer, K and V rows of every past position as
// f16.
//
// Layout per layer: K and V each (n_kv_heads, n_ctx, head_dim) f16, head-major. Decode
// attention for one kv head then reads one contiguous block of length * head_dim halves
// for K and one for V, and a thread given a range of heads streams its own disjoint region
// (hardware prefetchers follow it, no two threads share a cache line). Position-major
// (n_ctx, n_kv_heads, head_dim) would make each head's scan a strided gather of head_dim
// halves. Appending a token writes n_kv_heads short rows instead of one; that is
// negligible next to the scan.
//
// Several sequences (continuous batching) use one KvCache each. Memory is reserved for
// n_ctx positions up front but not touched, so the OS commits pages only as they fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hearth/compute/ops.h"

namespace hearth::compute {

// Read-only view of one layer, what attention() consumes.
struct KvLayerView {
  const uint16_t* k = nullptr;  // (n_kv_heads, n_ctx, head_dim) f16
  const uint16_t* v = nullptr;  // (n_kv_heads, n_ctx, head_dim) f16
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t n_ctx = 0;  // capacity in positions = row stride between heads
  int64_t n_pos = 0;  // valid positions [0, n_pos)

  const uint16_t* k_row(int head, int64_t pos) const {
    return k + (static_cast<int64_t>(head) * n_ctx + pos) * head_dim;
  }
  const uint16_t* v_row(int head, int64_t pos) const {
    return v + (static_cast<int64_t>(head) * n_ctx + pos) * head_dim;
  }
};

class KvCache {
 public:
  // n_layers: layers this cache holds (a ring stage holds only its own; the caller maps
  // model layer indices to 0..n_layers-1). Throws UsageError on non-positive sizes or a
  // size that overflows.
  KvCache(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx);

  // Bytes a cache of this shape reserves, for memory planning without allocating:
  // 2 (K and V) * n_layers * n_kv_heads * n_ctx * head_dim * sizeof(f16).
  // Same validation and errors as the constructor.
  static uint64_t bytes_for(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx);

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int64_t n_ctx() const { return n_ctx_; }
  size_t bytes() const { return n_elems_total_ * sizeof(uint16_t); }

  // Writes positions [pos, pos + n_tokens) of `layer` from f32 rows, rounding to f16, and
  // sets that layer's length to pos + n_tokens (later positions are dropped: writing at
  // pos overwrites from there, as after a rejected speculative draft).
  // k, v: token t's row at k + t * row_stride holds (n_kv_heads, head_dim) f32;
  // row_stride 0 means n_kv_heads * head_dim (rows packed).
  // Throws UsageError when pos + n_tokens > n_ctx ("context full") or pos > length(layer)
  // (a gap of unwritten positions).
  void store(int layer, int64_t pos, int64_t n_tokens, const float* k, const float* v,
             int64_t row_stride = 0, Isa isa = active_isa());

  // Positions written in `layer`: [0, length(layer)).
  int64_t length(int layer) const;
  // Positions written in every layer: what a finished forward pass has appended.
  int64_t length() const;
  // Forgets positions >= n_pos in every layer (multi-turn chat edits, speculative
  // rollback). n_pos above a layer's length leaves it unchanged; n_pos < 0 throws.
  void truncate(int64_t n_pos);
  void clear() { truncate(0); }

  KvLayerView view(int layer) const;
  // Mutable raw access (tests, future serialisation): (n_kv_heads, n_ctx, head_dim) f16.
  uint16_t* k_data(int layer);
  uint16_t* v_data(int layer);

 private:
  void check_layer(int layer) const;

  int n_layers_;
  int n_kv_heads_;
  int head_dim_;
  int64_t n_ctx_;
  size_t n_elems_layer_;  // n_kv_heads * n_ctx * head_dim, per K or per V
  size_t n_elems_total_;  // 2 * n_layers * n_elems_layer_
  std::unique_ptr<uint16_t[], void (*)(void*)> data_;  // (n_layers, 2 [K,V], layer) f16
  std::vector<int64_t> length_;                        // (n_layers)
};

// Rounds f32 to f16 (nearest even). src: (n) f32, dst: (n) f16 bits.
void f32_to_f16(const float* src, uint16_t* dst, int64_t n, Isa isa = active_isa());

namespace detail {
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f32_to_f16_avx512(const float* src, uint16_t* dst, int64_t n);
}  // namespace detail

}  // namespace hearth::compute
