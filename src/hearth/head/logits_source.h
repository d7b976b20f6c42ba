// Where the head's logits come from, whoever drives it (the generation loop of run, chat and
// the demo, or the server's scheduler): one local engine (LocalSource), or a ring of devices
// (cluster::RingSource, cluster::RecoveringRing). Each sequence has its own KV cache on every
// device that computes it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "hearth/model/batch.h"

namespace hearth::model {
class Engine;
}

namespace hearth::head {

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // Appends each item's tokens to its sequence, all items in one pass; writes logits as the
  // item asks (its last token's, or every token's).
  virtual void eval_batch(std::span<const model::EvalItem> items) = 0;
  // Forgets positions >= n_pos of `seq` (a rejected draft's tail).
  virtual void truncate(int64_t seq, int64_t n_pos) = 0;
  // Frees the sequence's cache (on every device of a ring).
  virtual void drop(int64_t seq) = 0;
  virtual int64_t vocab() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t seq_length(int64_t seq) const = 0;

  // Paged KV (EngineOptions::kv_block): the caches are blocks of one pool, which bounds all
  // sequences together and lets one sequence start from another's prefix. A server queues
  // requests by it instead of failing part way through one.
  struct KvBudget {
    int64_t block_rows = 0;  // positions per block
    int64_t capacity = 0;    // blocks in the pool
    int64_t available = 0;   // blocks free now
  };
  // Nothing when the caches are not paged (then no bound applies but the context, and
  // share_prefix() does nothing).
  virtual std::optional<KvBudget> kv_budget() const { return std::nullopt; }
  // Blocks appending n_tokens to `seq` would take from the pool (0 when not paged).
  virtual int64_t kv_blocks_needed(int64_t /*seq*/, int64_t /*n_tokens*/) const { return 0; }
  // Blocks only `seq` holds: what dropping it would give back to the pool (0 when not paged).
  virtual int64_t kv_blocks_owned(int64_t /*seq*/) const { return 0; }
  // Makes `dst` (new) hold the first n_pos positions of `src` without computing them; false
  // when this source cannot (not paged), and then nothing changed.
  virtual bool share_prefix(int64_t /*src*/, int64_t /*dst*/, int64_t /*n_pos*/) { return false; }

  // Appends `tokens` (non-empty) to sequence `seq` and writes the logits of the last one
  // (vocab), or of every one (tokens.size(), vocab) with `all`.
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits, bool all = false);
};

// A single device running every layer.
class LocalSource : public LogitsSource {
 public:
  explicit LocalSource(model::Engine& engine) : engine_(engine) {}
  void eval_batch(std::span<const model::EvalItem> items) override;
  void truncate(int64_t seq, int64_t n_pos) override;
  void drop(int64_t seq) override;
  int64_t vocab() const override;
  int64_t n_ctx() const override;
  int64_t seq_length(int64_t seq) const override;
  std::optional<KvBudget> kv_budget() const override;
  int64_t kv_blocks_needed(int64_t seq, int64_t n_tokens) const override;
  int64_t kv_blocks_owned(int64_t seq) const override;
  bool share_prefix(int64_t src, int64_t dst, int64_t n_pos) override;

 private:
  model::Engine& engine_;
};

}  // namespace hearth::head
