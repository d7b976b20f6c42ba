// The engine every device runs: a transformer stage over any set of layers of a llama/qwen2
// GGUF model, plus the head-only steps (embedding, output layer). The ring runs a device's
// windows with forward_layers(); a single device runs all layers (eval()).
//
// Data flow for one batch of n tokens of one sequence at positions pos0 .. pos0+n-1:
//   embed(tokens) -> hidden (n, dim) -> forward_layers(window 1) -> ... -> logits(last row)
// Each layer: rmsnorm -> Q,K,V (+bias) -> rope -> KV cache -> GQA attention -> output
// projection -> residual add; rmsnorm -> SwiGLU feed-forward -> residual add.
// Decode (n = 1) uses matvec; prefill (n > 1) uses the tiled matmul.
//
// Continuous batching: forward_batch()/eval_batch() run several sequences' rows stacked
// into one hidden (n_total, dim) (see batch.h); the single-sequence calls are its
// one-segment case, so a sequence's results are bitwise the same alone or batched.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hearth/base/huge_buffer.h"
#include "hearth/compute/kv_block_pool.h"
#include "hearth/compute/kv_cache.h"
#include "hearth/compute/rope.h"
#include "hearth/compute/thread_pool.h"
#include "hearth/model/batch.h"
#include "hearth/model/weight_feed.h"
#include "hearth/model/weights.h"

namespace hearth::model {

// Whether the engine copies its matrices into the rows16 layout at load (compute::
// repack_rows16): decode then runs closer to the DRAM bandwidth (docs/kernels.md has the
// figures), at the cost of anonymous memory (not evictable like the file's page cache) and a copy
// at start-up.
//   kAuto: when this CPU has rows16 kernels for the weight types and the copy takes at most
//          half of the memory available now (cgroup-aware); the ring turns it off for
//          devices that stream windows from disk (k > 1 rounds).
//   kOn:   whenever this CPU has rows16 kernels for the types, regardless of memory.
//   kOff:  never: every matrix is read from the file mapping.
enum class RepackMode { kAuto, kOn, kOff };

struct EngineOptions {
  int threads = 0;          // 0: all cores
  int64_t n_ctx = 0;        // KV capacity per sequence; 0: min(ctx_train, 4096)
  std::vector<int> layers;  // model layer indices this engine computes; empty: all
  bool no_layers = false;   // none at all (a ring head that only embeds and computes logits)
  RepackMode repack = RepackMode::kAuto;
  bool with_output = true;  // false: logits() is never called (ring workers): skip its repack
  compute::KvTypes kv_types = {};  // element types of every sequence's K and V cache
  // Paged KV (compute/kv_block_pool.h): positions per block, a power of two >= 16; 0: each
  // sequence has one contiguous region of n_ctx positions. Attention gives the same bits
  // either way.
  int kv_block = 0;
  // With kv_block: positions all sequences may hold together (rounded up to whole blocks);
  // 0: no bound. A batch that would need more is refused before it changes anything
  // (compute::KvPoolFull).
  int64_t kv_pool = 0;
  // For RepackMode::kAuto: the memory this device has free now and where that figure comes
  // from (the caller reads it: residency::read_memory_status), so the engine reads no live
  // figures of its own. 0: not known, and kAuto repacks.
  uint64_t memory_available = 0;
  std::string memory_source = {};
};

// "auto", "on", "off" -> mode; UsageError naming the value otherwise.
RepackMode parse_repack_mode(const std::string& text);

class Engine {
 public:
  // `file` must outlive the engine (weights are views into its mapping).
  Engine(const gguf::GgufFile& file, const EngineOptions& options);

  const HParams& hparams() const { return weights_.hp; }
  const ModelWeights& weights() const { return weights_; }
  int64_t n_ctx() const { return n_ctx_; }
  compute::KvTypes kv_types() const { return kv_types_; }
  compute::ThreadPool& pool() { return pool_; }
  // Bytes of matrices this engine copied into the rows16 layout at load (0: none; every
  // matrix is read from the file mapping).
  uint64_t repacked_bytes() const { return repacked_bytes_; }
  bool owns_layer(int layer) const;
  // Copies the small f32 tensors this engine reads (norms, biases, rope factors) out of the
  // file mapping into its own memory. A device that streams its matrices then never touches
  // the mapping between them, where each touch would fault in (and read ahead) streamed bytes.
  void pin_small_tensors();
  const std::vector<int>& layers() const { return layers_; }

  // Head: token ids -> rows of the embedding, hidden (n, dim) f32. UsageError on an id
  // outside the vocabulary.
  void embed(std::span<const int32_t> tokens, float* hidden) const;

  // Runs model layers [layer_begin, layer_end) (all owned) over hidden (n_tokens, dim) in
  // place, for sequence `seq` whose tokens sit at positions pos0 .. pos0 + n_tokens - 1.
  // The sequence's cache must hold exactly pos0 positions for those layers (UsageError
  // otherwise, and "context full" past n_ctx).
  void forward_layers(int64_t seq, int layer_begin, int layer_end, float* hidden, int64_t pos0,
                      int64_t n_tokens);

  // The same over a batch of sequences: hidden (batch_rows(segments), dim) in place, rows in
  // segment order. Everything is checked (see batch_rows(), context, cache lengths) before
  // any cache changes, so a refused batch leaves every sequence as it was. With a `feed`, the
  // layers' matrices are read where it says (a streaming device's buffers); the values are
  // the same bytes, so the results are bitwise those without it.
  void forward_batch(std::span<const BatchSegment> segments, int layer_begin, int layer_end,
                     float* hidden, WeightFeed* feed = nullptr);
  // A mixture's experts are read through `experts` when set (the same bytes: same results).
  void set_expert_feed(ExpertFeed* experts) { expert_feed_ = experts; }

  // Head: final norm and output projection of one hidden row (dim) -> logits (vocab).
  void logits(const float* hidden_row, float* logits);
  // The same for n_rows rows at once (one pass over the output matrix): rows (n_rows, dim)
  // -> logits (n_rows, vocab).
  void logits_rows(const float* rows, int64_t n_rows, float* logits);

  // Head of a batch: `hidden` (rows of all items, stacked in item order, dim) after the last
  // layer; writes each item's logits (of its last row, or of every row for all_logits) where
  // the item asks for them, with one pass over the output matrix for all of them.
  void batch_logits(std::span<const EvalItem> items, const float* hidden);

  // Single device: all layers over `tokens` appended to `seq` at its current length; writes
  // the logits of the last token (vocab) when `logits_out` is not null.
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits_out);
  // Single device, several sequences in one forward pass (each item as eval() would do it).
  void eval_batch(std::span<const EvalItem> items);

  // Positions cached for `seq` (0 for an unknown sequence).
  int64_t seq_length(int64_t seq) const;
  void truncate(int64_t seq, int64_t n_pos);  // forget positions >= n_pos
  void drop(int64_t seq);                     // free the sequence's cache
  // Paged KV only: sequence `dst` (created, or emptied first) holds the first n_pos positions
  // of `src` without computing them; the two share those blocks until either writes into
  // one (it then copies it). UsageError when KV is not paged or src holds fewer positions.
  void share_prefix(int64_t src, int64_t dst, int64_t n_pos);
  // Pool blocks a batch appending n_tokens to `seq` would take (0 when KV is not paged).
  int64_t kv_blocks_needed(int64_t seq, int64_t n_tokens) const;
  // Pool blocks only `seq` holds: what dropping it gives back (0 when KV is not paged).
  int64_t kv_blocks_owned(int64_t seq) const;
  // The block pool (null when KV is not paged).
  const compute::KvBlockPool* kv_pool() const { return kv_pool_.get(); }
  bool has_sequence(int64_t seq) const { return caches_.count(seq) != 0; }
  size_t n_sequences() const { return caches_.size(); }  // sequences holding a KV cache

  // Scratch grows to the largest batch seen. A ring stage reserves working memory for a few
  // rows only (profiler::kStageRows), so after a long prompt it gives the rest back: frees
  // every scratch buffer larger than `rows` rows (it grows again when a batch needs it).
  void trim_scratch(int64_t rows);
  // Bytes held by the scratch buffers now (capacity, not size).
  uint64_t scratch_bytes() const;

 private:
  compute::KvCache& cache_for(int64_t seq);
  void repack(const EngineOptions& options);
  void layer_forward(int layer, WeightFeed* feed, std::span<const BatchSegment> segments,
                     std::span<compute::KvCache* const> caches, float* x, int64_t n);
  void experts_forward(int layer, const float* xn, int64_t n, float* out);
  void project(const WeightView& w, const float* x, int64_t n, float* y);
  void project2(const WeightView& a, const WeightView& b, const float* x, int64_t n, float* ya,
                float* yb);
  void project3(const WeightView& a, const WeightView& b, const WeightView& c, const float* x,
                int64_t n, float* ya, float* yb, float* yc);
  // One group's products (outputs in view order), through the feed when there is one: whole,
  // or in the parts the feed asks for.
  void project_group(WeightFeed* feed, int layer, MatrixGroup g, GroupViews v, const float* x,
                     int64_t n, std::initializer_list<float*> outputs);

  ModelWeights weights_;
  ExpertFeed* expert_feed_ = nullptr;
  HugeBuffer repacked_;        // rows16 copies of the matrices that views in weights_ point to
  std::vector<float> pinned_;  // pin_small_tensors(): copies the norm/bias pointers point to
  uint64_t repacked_bytes_ = 0;
  int64_t n_ctx_;
  compute::KvTypes kv_types_;
  std::vector<int> layers_;       // owned model layers, ascending
  std::vector<int> local_index_;  // (n_layers) model layer -> cache layer, -1 if not owned
  compute::ThreadPool pool_;
  compute::RopeTable rope_;
  // Declared before caches_: they give their blocks back to it when destroyed.
  std::unique_ptr<compute::KvBlockPool> kv_pool_;
  std::unordered_map<int64_t, std::unique_ptr<compute::KvCache>> caches_;

  // Every scratch buffer with its floats per row, the kLayerScratch a layer grows first (one
  // list for growing, trimming and measuring them).
  struct ScratchBuffer {
    std::vector<float>* buf;
    size_t per_row;
  };
  static constexpr size_t kLayerScratch = 12;
  std::array<ScratchBuffer, 16> scratch() const;
  // Scratch, grown to the largest batch seen: (n, dim) (n, q_dim) (n, kv_dim) (n, ffn) f32;
  // a mixture of experts' gate/up are (n, k x ffn_expert).
  std::vector<float> xn_, q_, k_, v_, attn_, proj_, gate_, up_;
  std::vector<float> router_;       // (n, n_experts) the router's logits
  std::vector<float> moe_w_;        // (n, k) each row's expert weights
  std::vector<float> moe_x_;        // (n, dim) the rows routed to one expert, then its outputs
  std::vector<float> moe_out_;      // (n, k, dim) each row's expert outputs, in router order
  std::vector<int32_t> moe_sel_;    // (n, k) each row's experts, in router order
  std::vector<float> hidden_;       // (n, dim) f32: eval's embedded tokens
  std::vector<float> last_rows_;    // (n_seq, dim) f32: each sequence's last row, normed
  std::vector<float> logits_tmp_;   // (n_seq, vocab) f32
  std::vector<float> slice_out_;    // (n, rows of one part) f32: a part's products
  std::vector<int64_t> positions_;  // (n) position of each row
  std::vector<compute::KvCache*> batch_caches_;  // (n_seq) cache of each segment
};

}  // namespace hearth::model
