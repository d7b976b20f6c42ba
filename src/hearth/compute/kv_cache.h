// The key/value cache of one sequence: per layer, K and V rows of every past position, each
// in its own element type (KvType: f32, f16 by default, or the GGUF block types q8_0 and q4_0,
// which hold 32 values in 34 and 18 bytes).
//
// Layout per layer: K and V each (n_kv_heads, n_ctx, head_dim) in their type, head-major; a
// row is one head's head_dim values at one position (kv_row_bytes). Rows are stored in tiles
// of kKTileRows positions, laid out for the kernel that reads them ("K tiles" and "V tiles"
// below; f16 and f32 V rows stay rows); a tile takes the bytes of its rows, so sizes are
// those of rows. Decode attention for one kv head then reads one contiguous block of
// length * head_dim values for K and one for V, and a thread given a range of heads streams
// its own disjoint region (hardware prefetchers follow it, no two threads share a cache
// line). Position-major (n_ctx, n_kv_heads, head_dim) would make each head's scan a strided
// gather of short rows. Appending a token writes n_kv_heads short rows instead of one; that
// is negligible next to the scan.
//
// Several sequences (continuous batching) use one KvCache each. A contiguous cache reserves
// n_ctx positions up front in 2 MiB pages (HugeBuffer: a cache streamed every token through
// 4 KiB pages takes a TLB miss per page, dear under a hypervisor; docs/kernels.md "Attention
// at depth" has the figures); the OS commits a page when it is first written, and since
// every head's rows start in their own region, a first token commits most of a small
// cache. A paged cache takes fixed-size blocks from a KvBlockPool shared by the sequences
// (kv_block_pool.h: prefixes shared between sequences, a bound on all of them together).
// Attention reads both the same way (KvLayerView), with the same arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hearth/base/huge_buffer.h"
#include "hearth/compute/ops.h"

namespace hearth::compute {

// Element type of K or V rows. The quantized types are the GGUF blocks of the same name
// (quant/block_formats.h), so a row is quantized exactly as llama.cpp quantizes its cache.
enum class KvType : uint8_t { kF32, kF16, kQ8_0, kQ4_0 };

// "f32", "f16", "q8_0", "q4_0" (llama.cpp's spellings; case-insensitive) -> type; UsageError
// listing the choices otherwise. `what` names the option in the message.
KvType parse_kv_type(const std::string& text, const std::string& what = "KV cache type");
const char* kv_type_name(KvType t);
// Bytes of one row of head_dim values. UsageError when the type cannot hold such a row
// (the block types need head_dim to be a multiple of 32).
uint64_t kv_row_bytes(KvType t, int head_dim);
// Whether kv_row_bytes(t, head_dim) is defined.
bool kv_type_fits(KvType t, int head_dim);

// K tiles. Positions [16 t, 16 t + 16) of one kv head's K are one tile of 16 rows' bytes at
// the place of those rows, holding the same values as the rows, transposed:
//   f32, f16: value d of slot i (position 16 t + i) at element d * 16 + i;
//   q8_0: the f16 scale of block b of slot i at halfword b * 16 + i (head_dim / 32 * 16 of
//     them first), then int8 value d of slot i at byte (d / 2) * 32 + i * 2 + d % 2: each
//     pair of dims of the 16 slots is one run of 32 bytes, so a score kernel widens it to
//     16 bit and multiplies pairs of values with pairs of the query's in one instruction;
//   q4_0: the scales as q8_0, then the 4-bit values in runs of 16 bytes per pair of dims,
//     ordered as q8_0's run: value j of a run (j = i * 2 + d % 2) in byte j % 16, the low
//     nibble for j < 16 and the high nibble for the others.
// Contiguous caches round their rows up to whole tiles; pool blocks hold whole tiles.
inline constexpr int kKTileRows = 16;
// Writes one K row in the GGUF layout of t (kv_row_bytes) into slot `slot` of a tile.
void k_tile_put(KvType t, int head_dim, const uint8_t* row, uint8_t* tile, int slot);
// Reads slot `slot` of a tile back as a row in the GGUF layout of t.
void k_tile_get(KvType t, int head_dim, const uint8_t* tile, int slot, uint8_t* row);

// V tiles, at the place of the same 16 rows. f32 and f16: the rows themselves, slot i at
// row i. The block types are laid out for a weighted sum in integers, two positions per
// instruction: the f16 scales as in a K tile (block b of slot i at halfword b * 16 + i),
// then block after block (dims [32 b, 32 b + 32)) the tile's 8 pairs of slots, each pair's
// values of the block interleaved, value e of slot i next to the same value of slot i ^ 1:
//   q8_0: int8 value e of block b of slot i at byte b * 512 + (i / 2) * 64 + e * 2 + i % 2;
//   q4_0: 32 bytes per pair of slots and block, 16 per half of the block (h = e / 16):
//     place j = (e % 16) * 2 + i % 2 in byte b * 256 + (i / 2) * 32 + h * 16 + j % 16, the
//     low nibble for j < 16 (so its 32 places widen to q8_0's 32 bytes of that half).
void v_tile_put(KvType t, int head_dim, const uint8_t* row, uint8_t* tile, int slot);
void v_tile_get(KvType t, int head_dim, const uint8_t* tile, int slot, uint8_t* row);

// The element types of a cache: K and V separately (llama.cpp's -ctk / -ctv).
struct KvTypes {
  KvType k = KvType::kF16;
  KvType v = KvType::kF16;
  // Bytes one position takes in one layer: K and V rows of every kv head.
  uint64_t bytes_per_token(int n_kv_heads, int head_dim) const;
  bool operator==(const KvTypes&) const = default;
};

// Read-only view of one layer, what attention() consumes. Positions live in blocks: block b
// holds [b * 2^block_shift, (b + 1) * 2^block_shift), and in it this layer's K (and V) rows
// as (n_kv_heads, head_rows) rows of the type from k_offset (v_offset). A contiguous cache is
// one block of n_ctx rows per head, rounded up to whole K tiles (block_shift 62); a paged one
// (KvBlockPool) has blocks of head_rows = 2^block_shift positions.
struct KvLayerView {
  const uint8_t* const* blocks = nullptr;  // base of each block
  int64_t k_offset = 0;                    // this layer's K rows inside a block
  int64_t v_offset = 0;                    // this layer's V rows inside a block
  int block_shift = 62;                    // log2 of positions per block
  int64_t head_rows = 0;                   // rows between two heads inside a block
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t n_ctx = 0;  // capacity in positions
  int64_t n_pos = 0;  // valid positions [0, n_pos)
  KvType k_type = KvType::kF16;
  KvType v_type = KvType::kF16;
  int64_t k_row_bytes = 0;  // kv_row_bytes(k_type, head_dim)
  int64_t v_row_bytes = 0;

  int64_t pos_mask() const { return (int64_t{1} << block_shift) - 1; }
  // The K tile holding position pos of head `head` (see "K tiles").
  const uint8_t* k_tile(int head, int64_t pos) const {
    return row_at(k_offset, k_row_bytes, head, pos & ~int64_t{kKTileRows - 1});
  }
  // Position pos's K row of head `head` in the GGUF layout of k_type: dst (k_row_bytes).
  void copy_k_row(int head, int64_t pos, uint8_t* dst) const {
    k_tile_get(k_type, head_dim, k_tile(head, pos), static_cast<int>(pos & (kKTileRows - 1)), dst);
  }
  // The V tile holding position pos of head `head` (see "V tiles").
  const uint8_t* v_tile(int head, int64_t pos) const {
    return row_at(v_offset, v_row_bytes, head, pos & ~int64_t{kKTileRows - 1});
  }
  // Position pos's V row of head `head` in the GGUF layout of v_type: dst (v_row_bytes).
  void copy_v_row(int head, int64_t pos, uint8_t* dst) const {
    v_tile_get(v_type, head_dim, v_tile(head, pos), static_cast<int>(pos & (kKTileRows - 1)), dst);
  }
  const uint8_t* row_at(int64_t offset, int64_t row_bytes, int head, int64_t pos) const {
    return blocks[pos >> block_shift] + offset +
           (static_cast<int64_t>(head) * head_rows + (pos & pos_mask())) * row_bytes;
  }
};

// Row `pos` of head `head` of K (or V) as f32: dst (head_dim). For tests and references; the
// attention kernels convert rows themselves.
void kv_row_to_float(KvType t, const uint8_t* row, int head_dim, float* dst);
// The converter kv_row_to_float uses for t, to look up once outside a loop over rows.
using KvRowToFloat = void (*)(const void* row, float* dst, int64_t n);
KvRowToFloat kv_row_converter(KvType t);

class KvBlockPool;

class KvCache {
 public:
  // Contiguous: room for n_ctx positions reserved at once, committed by the OS page by page as
  // they fill. n_layers: layers this cache holds (a ring stage holds only its own; the caller
  // maps model layer indices to 0..n_layers-1). Throws UsageError on non-positive sizes, a
  // size that overflows, or a type that cannot hold rows of head_dim values.
  KvCache(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx, KvTypes types = {});
  // Paged: up to n_ctx positions in blocks of `pool` (which must outlive the cache), taken as
  // positions are stored and given back when they are truncated or the cache is destroyed.
  KvCache(KvBlockPool& pool, int64_t n_ctx);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // Bytes a contiguous cache of this shape reserves, for memory planning without allocating:
  // n_layers * n_ctx * types.bytes_per_token(n_kv_heads, head_dim), each layer's K and V
  // rounded up to whole cache lines. Same validation and errors as the constructor.
  static uint64_t bytes_for(int n_layers, int n_kv_heads, int head_dim, int64_t n_ctx,
                            KvTypes types = {});
  // Bytes of one layer's K (or V, by its type) for `rows` positions, whole cache lines.
  static uint64_t part_bytes(int n_layers, int n_kv_heads, int head_dim, int64_t rows, KvType t);

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int64_t n_ctx() const { return n_ctx_; }
  KvTypes types() const { return types_; }
  bool paged() const { return pool_ != nullptr; }
  // Memory the cache holds: reserved bytes when contiguous, its blocks' bytes when paged
  // (blocks shared with other caches counted in each).
  size_t bytes() const;

  // Writes positions [pos, pos + n_tokens) of `layer` from f32 rows, converting to the
  // cache's types (f16 rounds to nearest even, q8_0 / q4_0 quantize per 32 values), and
  // sets that layer's length to pos + n_tokens (later positions are dropped: writing at
  // pos overwrites from there, as after a rejected speculative draft).
  // k, v: token t's row at k + t * row_stride holds (n_kv_heads, head_dim) f32;
  // row_stride 0 means n_kv_heads * head_dim (rows packed).
  // Throws UsageError when pos + n_tokens > n_ctx ("context full") or pos > length(layer)
  // (a gap of unwritten positions); KvPoolFull when a paged cache needs a block and the pool
  // has none (blocks_needed() says beforehand).
  void store(int layer, int64_t pos, int64_t n_tokens, const float* k, const float* v,
             int64_t row_stride = 0, Isa isa = active_isa());
  // Pool blocks a store of [pos, pos + n_tokens) would take: blocks not held yet, and held
  // blocks shared with another cache (copied before the write). 0 when contiguous.
  int64_t blocks_needed(int64_t pos, int64_t n_tokens) const;
  // Pool blocks only this cache holds: what destroying it would give back (0 when contiguous).
  int64_t blocks_owned() const;

  // Positions written in `layer`: [0, length(layer)).
  int64_t length(int layer) const;
  // Positions written in every layer: what a finished forward pass has appended.
  int64_t length() const;
  // Forgets positions >= n_pos in every layer (multi-turn chat edits, speculative
  // rollback); a paged cache gives back the blocks past the last position kept. n_pos above a
  // layer's length leaves it unchanged; n_pos < 0 throws.
  void truncate(int64_t n_pos);
  void clear() { truncate(0); }

  // Paged caches of one pool: makes this cache hold the first n_pos positions of `src`
  // (n_pos <= src.length()) by pointing at src's blocks, without copying or computing them;
  // what this cache held before is given back. A later store into a shared block copies it
  // first, so neither cache sees the other's writes. UsageError otherwise.
  void share_prefix(const KvCache& src, int64_t n_pos);

  KvLayerView view(int layer) const;

 private:
  void check_layer(int layer) const;
  // Paged: makes blocks [first, last] this cache's own (taking new ones, copying shared ones).
  void own_blocks(int64_t first, int64_t last);
  void release_blocks_from(size_t first);

  int n_layers_;
  int n_kv_heads_;
  int head_dim_;
  int64_t n_ctx_;
  KvTypes types_;
  uint64_t k_row_bytes_ = 0, v_row_bytes_ = 0;  // one head's row at one position
  uint64_t k_bytes_ = 0;                        // K of one layer inside a block, whole cache lines
  uint64_t layer_stride_ = 0;                   // K and V of one layer inside a block
  int block_shift_ = 62;   // positions per block = 2^block_shift_ (contiguous: one block)
  int64_t head_rows_ = 0;  // rows between heads inside a block
  KvBlockPool* pool_ = nullptr;
  HugeBuffer data_;                                   // contiguous: (n_layers) of [K, V]
  std::vector<uint8_t*> blocks_;                      // base of each block held
  std::vector<int32_t> block_ids_;                    // paged: pool id of each block held
  std::vector<int64_t> length_;                       // (n_layers)
};

// Rounds f32 to f16 (nearest even). src: (n) f32, dst: (n) f16 bits.
void f32_to_f16(const float* src, uint16_t* dst, int64_t n, Isa isa = active_isa());

namespace detail {
void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n);
void f32_to_f16_avx512(const float* src, uint16_t* dst, int64_t n);
}  // namespace detail

}  // namespace hearth::compute
