// The scheduler thread: the only thread that touches the engine (or ring). Requests wait in
// a bounded queue; up to `parallel` of them are active, each in its own sequence (its own
// KV cache). Every step is ONE batched forward pass (LogitsSource::eval_batch; one trip
// around the ring): every decoding sequence contributes its last token, and prefilling sequences
// contribute their next prompt chunk (at most `prefill_chunk` tokens, cut at the same places
// whatever else runs), oldest first, as long as the step's prompt tokens stay within one
// chunk (so a long prompt cannot stall running streams for longer than one chunk; short
// prompts share a step). After the pass each sequence whose prompt is done samples its next
// token.
//
// The engine computes every row of a batch independently of the others, so a request's
// tokens are bitwise the same as alone, and greedy output does not depend on other traffic.
//
// Paged KV (LogitsSource::kv_budget): a request leaves the queue only when the pool can hold
// its prompt (less the blocks it shares) beside what the running ones still need; a new
// request starts from the longest prefix any cached sequence holds (a running one's, or a
// finished one kept), pointing at those blocks instead of computing them; a step takes only
// the rows whose blocks are free, kept sequences are let go first, and when no row can run the
// newest request is set back (its blocks freed, its tokens computed again later) so the
// older ones finish. Its output is unchanged: the same tokens come back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hearth/head/drafter.h"
#include "hearth/head/logits_source.h"
#include "hearth/serve/device_status.h"
#include "hearth/serve/job.h"
#include "hearth/serve/metrics.h"
#include "hearth/text/tokenizer.h"

namespace hearth::serve {

struct SchedulerOptions {
  int parallel = 4;         // active sequences at most
  int max_queue = 64;       // waiting requests at most; submit() refuses beyond
  int prefill_chunk = 256;  // prompt tokens per step, over all prefilling sequences
  // false: the step's sequences go through the source one by one (one forward pass each),
  // the pre-batching behaviour; kept as the baseline `hearth bench serve --compare` measures.
  bool batched = true;
  // Keep finished requests' sequences while slots are free and reuse the longest common
  // prompt prefix (llama-server's cache_prompt). Off: every request starts from nothing.
  bool prompt_cache = true;
  // Speculative decoding (head/drafter.h): non-null, each decoding sequence's step carries
  // its last token and up to draft_max drafts, verified in the same pass (composes with
  // grammars, logprobs and sampling: the verdict is the sampler's acceptance rule).
  // The drafter must outlive the scheduler; only the scheduler thread calls it.
  head::Drafter* drafter = nullptr;
  int draft_max = 16;
  int draft_min = 0;
  // A request still waiting after this many seconds (for a slot, or for KV blocks when a
  // paged pool is full) leaves the queue with a "busy" error (HTTP 503, Retry-After). 0: it
  // waits as long as it takes.
  double queue_timeout_s = 0;
};

class Scheduler {
 public:
  // `source`, `devices`, `tokenizer` and `metrics` must outlive the scheduler. Starts the
  // thread, the only one that calls `source` and `devices` (except DeviceStatus::ring_state).
  Scheduler(head::LogitsSource& source, DeviceStatus& devices, const text::Tokenizer& tokenizer,
            Metrics& metrics, SchedulerOptions options);
  ~Scheduler();  // finishes every unfinished job with an error and joins the thread
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a job; false when the queue is full (the job is untouched).
  bool submit(const std::shared_ptr<Job>& job);
  // Cancels a waiting or active job by id; false when no such job is unfinished.
  bool cancel(const std::string& id);
  // Cancels every waiting and active job (shutdown).
  void cancel_all();
  int64_t n_ctx() const { return source_.n_ctx(); }

 private:
  struct Slot;
  void loop();
  void step();
  void poll_devices();  // memory pressure of every device into the metrics  // one batched forward
                        // pass over the active sequences
  // Chooses the token at a position whose logits are `row`: sampled, or the verdict on
  // `draft` (>= 0), and emits it (which may finish the request). True when the draft passed.
  bool sample_next(Slot& s, const float* row, int32_t draft = -1);
  // After a pass: the slot's drafts judged in order; the cache forgets from the first
  // rejected one (or the one the request stopped at).
  void verify_drafts(Slot& s, size_t cache_before);
  void close_trip(Slot& s);  // counts the drafted trip being judged (once)
  void finish(Slot& s, const std::string& reason, const std::string& error = {});
  void drop_sequence(int64_t seq);

  head::LogitsSource& source_;
  DeviceStatus& devices_;
  const text::Tokenizer& tokenizer_;
  Metrics& metrics_;
  const SchedulerOptions opt_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> waiting_;         // guarded by mu_
  std::map<std::string, std::weak_ptr<Job>> by_id_;  // unfinished jobs, guarded by mu_
  bool stopping_ = false;                            // guarded by mu_
  std::vector<std::unique_ptr<Slot>> active_;        // scheduler thread only
  int64_t next_seq_ = 1;                             // scheduler thread only
  // Sequences of finished requests kept with their KV cache, so that a request whose prompt
  // starts with the same tokens (a chat resending its conversation) computes only the rest.
  // At most parallel - active of them: the source never holds more than --parallel
  // sequences (ring workers refuse more). Scheduler thread only; oldest first.
  struct KeptSequence {
    int64_t seq;
    std::vector<int32_t> tokens;  // what its cache holds, in order
  };
  std::deque<KeptSequence> kept_;
  // A sequence for `prompt`: the kept one sharing the longest prefix with it (truncated to
  // that prefix; *reused = its length), else a new one. Drops kept sequences as needed to
  // stay within --parallel.
  int64_t claim_sequence(const std::vector<int32_t>& prompt, size_t* reused);
  // Paged KV: the longest prefix of `prompt` (short of its last token) that a cached
  // sequence other than `self` holds, and that sequence (-1: none).
  size_t best_prefix(const std::vector<int32_t>& prompt, int64_t* seq, int64_t self = -1) const;
  // Paged KV, a prompt not started yet: points it at a longer cached prefix if one appeared
  // since it was admitted; true when it should rather wait, because an older request is
  // computing at least one more block of the prefix they share.
  bool share_or_wait(Slot& s);
  // Paged KV: points `seq`, which holds the first `held` positions of `prompt`, at the longest
  // prefix of it that another cached sequence holds, if longer (counted in the metrics);
  // returns the positions `seq` holds now.
  size_t share_longest_prefix(int64_t seq, const std::vector<int32_t>& prompt, size_t held);
  // Paged KV: whether the pool can take a request for `prompt` now, beside `promised` blocks
  // already promised to requests admitted this round and what running prompts still need;
  // lets kept sequences go to make room. Adds the request's blocks to `promised` when it can.
  bool room_for(const std::vector<int32_t>& prompt, int64_t* promised);
  bool drop_oldest_kept();  // false when none is kept
  // Paged KV, no row could run: sets the newest request that holds blocks back to the queue's
  // side of the pool (its cache freed, its tokens to be computed again).
  void set_back_newest();
  // Tokens a slot must have in its cache before it decodes: its prompt, or after it was set
  // back, everything it had.
  static const std::vector<int32_t>& feed(const Slot& s);
  void keep_or_drop(Slot& s, bool keep);
  // Drafts for a decoding slot's next step (none without a drafter, or no room).
  void draft_for(Slot& s);
  std::thread thread_;
};

}  // namespace hearth::serve
