// A ring head that survives the loss of workers (issue 17, docs/ring.md "Recovery").
//
// It drives a RingSource and keeps every sequence's tokens. When a step fails because worker
// links are lost (a worker killed, or stalled past the transport's heartbeat timeout), it
// stops the old ring, asks `replan` for the options of a ring without those workers, builds
// it (retrying while the workers left finish their old session), rebuilds every device's KV
// cache by evaluating each sequence's tokens again, and runs the failed step on the new ring.
// The caller sees a slower step, not an error: with every device on the same weight layout
// the logits are those of an undisturbed run. Failures that are not a lost device (a step
// timeout, a worker's own error, a ring of the head alone failing) are rethrown.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hearth/cluster/ring_source.h"

namespace hearth::cluster {

// One recovery, for reports (--json "recoveries").
struct Recovery {
  std::vector<std::string> lost;  // control addresses of the workers left out
  int devices_left = 0;           // ring size afterwards, head included
  double detect_ms = 0;           // from the failed step's start to the failure
  double rebuild_ms = 0;          // stopping the old ring and setting up the new one
  double replay_ms = 0;           // re-evaluating the tokens so far (KV caches rebuilt)
  int64_t replayed_tokens = 0;
  double stall_ms() const { return detect_ms + rebuild_ms + replay_ms; }
};

// Options of the ring without the workers at `lost` (indices into old.workers, ascending).
using Replan = std::function<RingOptions(const RingOptions& old, const std::vector<size_t>& lost)>;

// The plan of a ring without the workers at `lost`: their layers per round go to the devices
// left in proportion to what each had (largest remainder; ties to the earlier device), so
// W and the rounds stay as they were. An empty plan (even split) stays empty.
std::vector<int> plan_without(const std::vector<int>& plan, const std::vector<size_t>& lost);

// The Replan of a manual or Halda plan: the same options without the lost workers, their
// layers given to the others by plan_without().
RingOptions options_without(const RingOptions& old, const std::vector<size_t>& lost);

class RecoveringRing : public model::LogitsSource {
 public:
  // `file` must outlive this. Builds the first ring at once (errors as RingSource's).
  RecoveringRing(const gguf::GgufFile& file, RingOptions options, Replan replan,
                 int max_recoveries = 4);
  ~RecoveringRing() override;

  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override;
  void eval_batch(std::span<const model::EvalItem> items);  // RingSource::eval_batch, recovering
  void truncate(int64_t seq, int64_t n_pos);
  void drop(int64_t seq);
  int64_t vocab() const override { return vocab_; }
  int64_t n_ctx() const override { return n_ctx_; }
  // Positions held: the tokens evaluated so far (the same on every ring it re-forms).
  int64_t seq_length(int64_t seq) const override;

  // At an idle moment (no step in flight): workers lost earlier that answer a Ping again
  // rejoin. The ring re-forms with them (the plan as at start, less those still lost) and
  // the sequences held are replayed before the next step. Returns true when the ring changed.
  bool try_rejoin();
  int rejoins() const { return rejoins_; }

  RingSource& ring() { return *ring_; }  // the ring in use now
  const std::vector<Recovery>& recoveries() const { return recoveries_; }

 private:
  // Runs `step` on the ring in use, recovering from lost workers and retrying it.
  template <typename Step>
  void with_recovery(Step step);
  void recover(const std::vector<size_t>& lost, double detect_ms);
  void form_ring(const std::string& why);  // ring_ from options_, retrying while workers settle
  void replay();

  const gguf::GgufFile& file_;
  const RingOptions original_;  // as at start: rejoins go back towards it
  RingOptions options_;
  Replan replan_;
  int max_recoveries_;
  std::unique_ptr<RingSource> ring_;
  std::unordered_map<int64_t, std::vector<int32_t>> history_;  // tokens per sequence
  std::vector<Recovery> recoveries_;
  int64_t vocab_ = 0, n_ctx_ = 0;        // the same on every ring
  bool replay_pending_ = false;          // a new ring holds no KV cache yet
  std::optional<size_t> replay_record_;  // the recovery whose figures the replay completes
  int rejoins_ = 0;
};

}  // namespace hearth::cluster
