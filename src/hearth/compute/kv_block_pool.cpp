#include "hearth/compute/kv_block_pool.h"

#include <fmt/format.h>

namespace hearth::compute {

KvBlockPool::KvBlockPool(int n_layers, int n_kv_heads, int head_dim, int block_rows,
                         int64_t max_blocks, KvTypes types)
    : n_layers_(n_layers),
      n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      block_rows_(block_rows),
      max_blocks_(max_blocks),
      types_(types) {
  if (block_rows < 16 || (block_rows & (block_rows - 1)) != 0) {
    throw UsageError(
        fmt::format("KV block of {} positions: use a power of two of at least 16", block_rows));
  }
  if (max_blocks < 1 || max_blocks > (int64_t{1} << 30)) {
    throw UsageError(fmt::format("KV pool of {} blocks: use 1 to 2^30", max_blocks));
  }
  // A block is laid out as a one-layer-long contiguous cache of block_rows positions per
  // layer, so the contiguous cache's size rules (and errors) apply.
  k_bytes_ = KvCache::part_bytes(n_layers, n_kv_heads, head_dim, block_rows, types.k);
  layer_bytes_ =
      k_bytes_ + KvCache::part_bytes(n_layers, n_kv_heads, head_dim, block_rows, types.v);
  block_bytes_ = layer_bytes_ * static_cast<uint64_t>(n_layers);
}

int32_t KvBlockPool::acquire() {
  if (in_use_ >= max_blocks_) {
    throw KvPoolFull(fmt::format(
        "KV pool full: all {} blocks of {} positions are in use (raise --kv-pool or lower "
        "--parallel)",
        max_blocks_, block_rows_));
  }
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int32_t>(blocks_.size());
    blocks_.emplace_back();
    refs_.push_back(0);
  }
  blocks_[static_cast<size_t>(id)] = HugeBuffer(block_bytes_);
  refs_[static_cast<size_t>(id)] = 1;
  ++in_use_;
  return id;
}

void KvBlockPool::retain(int32_t id) {
  ++refs_.at(static_cast<size_t>(id));
}

void KvBlockPool::release(int32_t id) {
  int32_t& r = refs_.at(static_cast<size_t>(id));
  if (r <= 0) return;
  if (--r == 0) {
    blocks_[static_cast<size_t>(id)] = HugeBuffer();  // unmapped: the memory is the system's
    free_ids_.push_back(id);
    --in_use_;
  }
}

}  // namespace hearth::compute
