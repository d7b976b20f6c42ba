// A ring head that survives the loss of workers (issue 17, docs/ring.md "Recovery").
//
// It drives a RingSource and keeps every sequence's tokens. When a step fails because worker
// links are lost (a worker killed, or stalled past the transport's heartbeat timeout), it
// stops the old ring, asks `replan` for the options of a ring over the workers left, builds
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
  std::vector<int> plan;          // windows of the new ring, head first
  double detect_ms = 0;           // from the failed step's start to the failure
  double replan_ms = 0;           // choosing the new windows (Halda, or shares of the old)
  double rebuild_ms = 0;          // stopping the old ring and setting up the new one
  double replay_ms = 0;           // re-evaluating the tokens so far (KV caches rebuilt)
  int64_t replayed_tokens = 0;
  double stall_ms() const { return detect_ms + replan_ms + rebuild_ms + replay_ms; }
};

// Options of a ring over the workers `workers` (control addresses, ring order): the windows,
// and the workers to use (a replanner may leave some of them idle, as Halda's device
// selection does). Throws UsageError when no plan fits.
using Replan = std::function<RingOptions(const std::vector<std::string>& workers)>;

// Devices that may join the ring at an idle moment besides those it knew (e.g. found by LAN
// discovery): control addresses.
using Candidates = std::function<std::vector<std::string>()>;

// The plan of a ring without the workers at `lost`: their layers per round go to the devices
// left in proportion to what each had (largest remainder; ties to the earlier device), so
// W and the rounds stay as they were. An empty plan (even split) stays empty.
std::vector<int> plan_without(const std::vector<int>& plan, const std::vector<size_t>& lost);

// The Replan of a manual plan or an even split: `original`'s options over a subset of its
// workers, the layers of those missing given to the others by plan_without(). Workers it did
// not know may join an even split (UsageError with a manual plan: there is no window to give
// them).
Replan proportional_replan(RingOptions original);

class RecoveringRing : public head::LogitsSource {
 public:
  // `file` must outlive this. Builds the first ring at once (errors as RingSource's).
  // `planned_over`: the workers the first plan was chosen from (default: options.workers);
  // those it left idle are not probed for rejoins, since a re-plan would leave them out again.
  RecoveringRing(const gguf::GgufFile& file, RingOptions options, Replan replan,
                 int max_recoveries = 4, std::vector<std::string> planned_over = {});
  ~RecoveringRing() override;

  // RingSource::eval_batch, recovering.
  void eval_batch(std::span<const model::EvalItem> items) override;
  void truncate(int64_t seq, int64_t n_pos) override;
  void drop(int64_t seq) override;
  int64_t vocab() const override { return vocab_; }
  int64_t n_ctx() const override { return n_ctx_; }
  // Positions held: the tokens evaluated so far (the same on every ring it re-forms).
  int64_t seq_length(int64_t seq) const override;

  // Where new devices come from; called by try_rejoin().
  void set_candidates(Candidates c) { candidates_ = std::move(c); }

  // At an idle moment (no step in flight): workers lost earlier, and candidates not yet
  // planned over, that answer a Ping join. The ring re-forms over them and the workers it
  // had (a re-plan) and the sequences held are replayed before the next step. Returns true
  // when the ring changed.
  bool try_rejoin();
  int rejoins() const { return rejoins_; }

  RingSource& ring() { return *ring_; }  // the ring in use now
  const std::vector<Recovery>& recoveries() const { return recoveries_; }

 private:
  // Runs `step` on the ring in use, recovering from lost workers and retrying it.
  template <typename Step>
  void with_recovery(Step step);
  void recover(const std::vector<size_t>& lost, double detect_ms);
  // Re-plans over `planned` (ring order of known_) and forms that ring.
  void replan_and_form(std::vector<std::string> planned, const std::string& why);
  void form_ring(const std::string& why);  // ring_ from options_, retrying while workers settle
  void replay();

  const gguf::GgufFile& file_;
  RingOptions options_;
  Replan replan_;
  int max_recoveries_;
  std::vector<std::string> known_;         // every worker seen, in ring order
  std::vector<std::string> planned_over_;  // the workers the ring in use was planned over
  Candidates candidates_;
  std::unique_ptr<RingSource> ring_;
  std::unordered_map<int64_t, std::vector<int32_t>> history_;  // tokens per sequence
  std::vector<Recovery> recoveries_;
  int64_t vocab_ = 0, n_ctx_ = 0;        // the same on every ring
  bool replay_pending_ = false;          // a new ring holds no KV cache yet
  std::optional<size_t> replay_record_;  // the recovery whose figures the replay completes
  int rejoins_ = 0;
};

}  // namespace hearth::cluster
