// Where the server's tokens are computed: one local engine or the head of a ring. The
// scheduler thread is the only caller, so implementations need no locking.
#pragma once

#include <cstdint>
#include <span>

#include "hearth/cluster/ring_source.h"
#include "hearth/model/engine.h"

namespace hearth::serve {

class Backend {
 public:
  virtual ~Backend() = default;
  // Appends `tokens` to sequence `seq` (its own KV cache) and writes the logits of the last
  // one: (vocab) f32.
  virtual void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) = 0;
  virtual void drop(int64_t seq) = 0;  // frees the sequence's cache on every device
  virtual int64_t vocab() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t seq_length(int64_t seq) const = 0;
};

class LocalBackend : public Backend {
 public:
  explicit LocalBackend(model::Engine& engine) : engine_(engine) {}
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override {
    engine_.eval(seq, tokens, logits);
  }
  void drop(int64_t seq) override { engine_.drop(seq); }
  int64_t vocab() const override { return engine_.hparams().vocab; }
  int64_t n_ctx() const override { return engine_.n_ctx(); }
  int64_t seq_length(int64_t seq) const override { return engine_.seq_length(seq); }

 private:
  model::Engine& engine_;
};

class RingBackend : public Backend {
 public:
  explicit RingBackend(cluster::RingSource& ring) : ring_(ring) {}
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override {
    ring_.eval(seq, tokens, logits);
  }
  void drop(int64_t seq) override { ring_.drop(seq); }
  int64_t vocab() const override { return ring_.vocab(); }
  int64_t n_ctx() const override { return ring_.n_ctx(); }
  int64_t seq_length(int64_t seq) const override { return ring_.seq_length(seq); }

 private:
  cluster::RingSource& ring_;
};

}  // namespace hearth::serve
