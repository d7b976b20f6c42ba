// Causal multi-head attention with grouped-query heads over a KvCache layer (K and V rows
// in f32, f16, q8_0 or q4_0).
//
// Query head h reads kv head h / (n_heads / n_kv_heads). Query token t of a block sits at
// position pos0 + t and attends to cache positions [0, pos0 + t] with scores
// scale * q.k, softmax over positions, then the weighted sum of V rows. Decode is
// n_tokens = 1; prefill is a block (causal inside the block, full over earlier positions).
// The K/V rows of the block itself must already be in the cache (KvCache::store first).
//
// Threading: attention() touches only out rows of heads [h_begin, h_end), so a thread pool
// runs part i of n on attention_split(shape, n, i) with no synchronisation between parts;
// with compute::ThreadPool:
//
//   pool.run([&](int i, int n) {
//     const HeadRange r = attention_split(shape, n, i);
//     attention(shape, kv, q, q_stride, out, out_stride, pos0, n_tokens, r.begin, r.end);
//   });
//
// The all-heads overload below is the same call as one plain loop on the calling thread.
//
// Kernels: every ISA (the kScalar one too) processes one kv head's query heads together,
// so each K/V row is converted to f32 once per group and position, with an online
// softmax over chunks of 128 positions; they need under 128 KiB of stack, never allocate, and
// give bit-identical results however heads are split or tokens are batched (prefill equals
// token-by-token decode). ref::attention is the double-precision reference the tests use;
// it also serves head_dim > 512.
#pragma once

#include <cstdint>

#include "hearth/compute/kv_cache.h"
#include "hearth/compute/ops.h"

namespace hearth::compute {

struct AttentionShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads; n_heads % n_kv_heads == 0
  int head_dim = 0;
  float scale = 0.0f;  // score scale; 0 means 1 / sqrt(head_dim)
};

struct HeadRange {
  int begin = 0;
  int end = 0;  // exclusive
};

// Part `part` of `n_parts` of the query heads. With n_parts <= n_kv_heads the ranges are
// whole GQA groups (each kv head streamed by one part); beyond that, query heads are
// split evenly. Ranges of different parts are disjoint, cover [0, n_heads), may be empty.
HeadRange attention_split(const AttentionShape& shape, int n_parts, int part);

// q: (n_tokens, n_heads, head_dim) f32, token t's row at q + t * q_stride (0 = packed);
// out: same shape at out + t * out_stride (0 = packed); only heads [h_begin, h_end) are
// written. Throws UsageError when shapes disagree with the cache view, when
// pos0 + n_tokens > kv.n_pos (K/V of the block not stored yet), or the range is invalid.
void attention(const AttentionShape& shape, const KvLayerView& kv, const float* q, int64_t q_stride,
               float* out, int64_t out_stride, int64_t pos0, int64_t n_tokens, int h_begin,
               int h_end, Isa isa = active_isa());

// All heads on the calling thread, packed q and out.
void attention(const AttentionShape& shape, const KvLayerView& kv, const float* q, float* out,
               int64_t pos0, int64_t n_tokens, Isa isa = active_isa());

namespace ref {
// Two passes per (token, head): all scores, softmax, weighted V sum; accumulates in double.
// Same contract as the optimized attention(); arguments already validated. The query is
// used as given: for K of a block type the kernels round it first (quantize_query_block),
// which moves a score by far less than K's own rounding.
void attention(const AttentionShape& shape, const KvLayerView& kv, const float* q, int64_t q_stride,
               float* out, int64_t out_stride, int64_t pos0, int64_t n_tokens, int h_begin,
               int h_end);
}  // namespace ref

namespace detail {
// One kv head's rows of K or V: position p's row at row(p); for K, row(p) with p a multiple
// of kKTileRows is the K tile of [p, p + 16). Positions sit in blocks of 2^block_shift
// (KvLayerView), so a run of up to 16 rows starting at a multiple of its length is
// consecutive in memory.
struct KvRows {
  const uint8_t* const* blocks = nullptr;  // base of each block
  int64_t offset = 0;                      // the head's first row inside a block
  int block_shift = 62;
  int64_t row_bytes = 0;  // kv_row_bytes(type, head_dim)
  KvType type = KvType::kF16;
  const uint8_t* row(int64_t pos) const {
    return blocks[pos >> block_shift] + offset +
           (pos & ((int64_t{1} << block_shift) - 1)) * row_bytes;
  }
};

// The kernels the dispatcher calls per kv head: n_rows query rows sharing that kv head,
// row r attending to positions [0, row_len[r]) (>= 1; prefill tiles mix tokens, so
// lengths differ). q, out: (n_rows, head_dim) f32 contiguous. head_dim <=
// kAttentionMaxHeadDim.
inline constexpr int kAttentionMaxHeadDim = 512;

// K of a block type (q8_0, q4_0) is multiplied in integers, 16 bit by 8: each block of 32
// query values is rounded to int16, q[i] = nearest-even(x[i] * 32767 / max|x|), and the
// block's sum of q[i] * k[i] is exact. Writes q (32) and returns the block's scale,
// max|x| / 32767 (0 when every x is 0; NaN, with q all 0, when any x is not finite). One
// definition, so that every kernel rounds alike. A query value moves by at most
// max|x| / 65534 of its block, far less than a q8_0 K value's rounding (max|k| / 254).
float quantize_query_block(const float* x, int16_t* q);
void attend_rows_avx2(const float* q, float* out, int n_rows, const int64_t* row_len,
                      const KvRows& k, const KvRows& v, int head_dim, float scale);
void attend_rows_avx512(const float* q, float* out, int n_rows, const int64_t* row_len,
                        const KvRows& k, const KvRows& v, int head_dim, float scale);
}  // namespace detail

}  // namespace hearth::compute
