// Where the head's logits come from, whoever drives it (the generation loop of run, chat and
// the demo, or the server's scheduler): one local engine (LocalSource), or a ring of devices
// (cluster::RingSource, cluster::RecoveringRing). Each sequence has its own KV cache on every
// device that computes it.
#pragma once

#include <cstdint>
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

 private:
  model::Engine& engine_;
};

}  // namespace hearth::head
