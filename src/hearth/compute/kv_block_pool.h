// Fixed-size blocks of KV cache shared by every sequence of one engine (paged KV, for
// serving). A block holds `block_rows` consecutive positions of every layer: per layer, K
// then V, each (n_kv_heads, block_rows, head_dim) rows of its type, head-major as in a
// contiguous cache, so attention streams one head's rows of a block in one run.
//
// Why blocks: a sequence's memory then follows its tokens block by block and goes back to
// the system when it ends or is cut; sequences that start with the same prompt (a server's
// system prompt) point at the same blocks, stored and computed once (KvCache::share_prefix);
// and `max_blocks` bounds all sequences together, so a server can queue a request instead
// of running out of memory part way through one.
//
// Blocks are counted by reference. A cache writing into a block that another also holds
// copies it first (copy on write), so sharing never changes what a sequence reads. A block
// is its own anonymous mapping, returned to the system as soon as no cache holds it.
// Single-threaded, like the engine that owns it.
#pragma once

#include <cstdint>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/compute/kv_cache.h"

namespace hearth::compute {

// Thrown when a store needs a block and every one is in use. The engine checks a whole
// batch before it stores anything, so a refused batch leaves every cache as it was.
class KvPoolFull : public UsageError {
 public:
  using UsageError::UsageError;
};

class KvBlockPool {
 public:
  // block_rows: positions per block, a power of two >= 16 (attention reads up to four
  // consecutive rows at positions that are multiples of their count, which then never straddle
  // two blocks). max_blocks >= 1. Throws UsageError otherwise, or on shapes KvCache refuses.
  KvBlockPool(int n_layers, int n_kv_heads, int head_dim, int block_rows, int64_t max_blocks,
              KvTypes types = {});
  KvBlockPool(const KvBlockPool&) = delete;
  KvBlockPool& operator=(const KvBlockPool&) = delete;

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  int block_rows() const { return block_rows_; }
  KvTypes types() const { return types_; }
  uint64_t block_bytes() const { return block_bytes_; }
  // Offsets of a layer's K and V inside a block.
  uint64_t k_offset(int layer) const { return static_cast<uint64_t>(layer) * layer_bytes_; }
  uint64_t v_offset(int layer) const { return k_offset(layer) + k_bytes_; }

  int64_t capacity() const { return max_blocks_; }
  int64_t in_use() const { return in_use_; }
  int64_t available() const { return max_blocks_ - in_use_; }
  // Blocks needed to hold n positions.
  int64_t blocks_for(int64_t n_positions) const {
    return (n_positions + block_rows_ - 1) / block_rows_;
  }

  // A new block with one reference; KvPoolFull when all max_blocks are in use.
  int32_t acquire();
  void retain(int32_t id);
  // Drops a reference; the block's memory goes back to the system with the last one.
  void release(int32_t id);
  int32_t refs(int32_t id) const { return refs_.at(static_cast<size_t>(id)); }
  uint8_t* data(int32_t id) const { return blocks_.at(static_cast<size_t>(id)).data(); }

 private:
  int n_layers_, n_kv_heads_, head_dim_, block_rows_;
  int64_t max_blocks_;
  KvTypes types_;
  uint64_t k_bytes_ = 0;      // K of one layer in a block, whole cache lines
  uint64_t layer_bytes_ = 0;  // K and V of one layer in a block
  uint64_t block_bytes_ = 0;
  int64_t in_use_ = 0;
  std::vector<HugeBuffer> blocks_;  // by id; empty while free
  std::vector<int32_t> refs_;       // by id; 0 = free
  std::vector<int32_t> free_ids_;   // ids whose slot can be reused
};

}  // namespace hearth::compute
