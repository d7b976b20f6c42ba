// One generation request as the scheduler sees it, and the channel its output flows back
// through to the HTTP thread that waits for it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "hearth/text/grammar.h"
#include "hearth/text/sampler.h"

namespace hearth::serve {

struct JobParams {
  std::vector<int32_t> prompt;  // (n_prompt) token ids, already rendered and tokenized
  int32_t max_tokens = -1;      // < 0: until end of generation or context
  text::SamplerParams sampling;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;        // keep generating past end-of-generation tokens
  int logprobs = -1;              // >= 0: report each token's logprob and this many top ones
  std::shared_ptr<const text::Grammar> grammar;  // non-null: the output must be a sentence of it
};

// What the waiting side sees. finish_reason: "stop" (end of generation or stop string),
// "length" (max_tokens or context full), "cancelled", "error" (then `error` says why).
struct JobOutput {
  std::string text;  // new text since the previous take()
  // With JobParams::logprobs: one entry per generated token since the previous take(). A
  // token's entry comes with the text it completes (text held back as a possible stop string,
  // or an incomplete UTF-8 character, brings its entries later).
  std::vector<text::TokenLogprobs> logprobs;
  bool finished = false;
  std::string finish_reason;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;  // prompt tokens a kept sequence already held (prompt cache)
  int64_t completion_tokens = 0;
  // Speculative decoding: drafts verified for this request and those accepted.
  int64_t drafted = 0, accepted = 0;
  // Finished before it left the queue because the queue's deadline passed (HTTP 503 with
  // Retry-After): finish_reason is "error".
  bool busy = false;
};

class Job {
 public:
  Job(std::string id, JobParams params) : id_(std::move(id)), params_(std::move(params)) {}

  const std::string& id() const { return id_; }
  const JobParams& params() const { return params_; }
  double arrival_ms() const { return arrival_ms_; }
  void set_arrival_ms(double t) { arrival_ms_ = t; }

  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

  // Waiting side: blocks until there is new text, the job finished, or `timeout` passed;
  // returns the new text and the state.
  JobOutput take(std::chrono::milliseconds timeout);
  // Waiting side: blocks until the job left the queue or finished, or `timeout` passed; true
  // when it did. A stream starts only then, so that a request the queue refuses can still be
  // answered with an HTTP error.
  bool wait_started(std::chrono::milliseconds timeout);
  // The final output of a job refuse_busy() finished (nothing otherwise); takes nothing.
  std::optional<JobOutput> refused();

  // Scheduler side.
  void emit(std::string_view text, int64_t completion_tokens,
            std::vector<text::TokenLogprobs> logprobs = {});
  void finish(const std::string& reason, const std::string& error = {});
  void start();  // the job left the queue
  // Finishes a job still in the queue: an "error" with `busy` set (HTTP 503).
  void refuse_busy(const std::string& why);
  void set_cached_tokens(int64_t n);
  void add_drafts(int64_t drafted, int64_t accepted);

 private:
  const std::string id_;
  const JobParams params_;
  double arrival_ms_ = 0;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  JobOutput pending_;     // guarded by mu_
  bool started_ = false;  // guarded by mu_
};

}  // namespace hearth::serve
