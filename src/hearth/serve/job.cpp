#include "hearth/serve/job.h"

namespace hearth::serve {

JobOutput Job::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] {
    return !pending_.text.empty() || !pending_.logprobs.empty() || pending_.finished;
  });
  JobOutput out = pending_;
  pending_.text.clear();
  pending_.logprobs.clear();
  return out;
}

bool Job::wait_started(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return started_ || pending_.finished; });
}

std::optional<JobOutput> Job::refused() {
  std::lock_guard lock(mu_);
  if (!pending_.busy) return std::nullopt;
  return pending_;
}

void Job::start() {
  {
    std::lock_guard lock(mu_);
    started_ = true;
  }
  cv_.notify_all();
}

void Job::refuse_busy(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (pending_.finished) return;
    pending_.busy = true;
  }
  finish("error", why);
}

void Job::emit(std::string_view text, int64_t completion_tokens,
               std::vector<text::TokenLogprobs> logprobs) {
  {
    std::lock_guard lock(mu_);
    pending_.text.append(text);
    for (auto& lp : logprobs) pending_.logprobs.push_back(std::move(lp));
    pending_.prompt_tokens = static_cast<int64_t>(params_.prompt.size());
    pending_.completion_tokens = completion_tokens;
  }
  cv_.notify_all();
}

void Job::set_cached_tokens(int64_t n) {
  std::lock_guard lock(mu_);
  pending_.cached_tokens = n;
}

void Job::add_drafts(int64_t drafted, int64_t accepted) {
  std::lock_guard lock(mu_);
  pending_.drafted += drafted;
  pending_.accepted += accepted;
}

void Job::finish(const std::string& reason, const std::string& error) {
  {
    std::lock_guard lock(mu_);
    if (pending_.finished) return;
    pending_.prompt_tokens = static_cast<int64_t>(params_.prompt.size());
    pending_.finished = true;
    pending_.finish_reason = reason;
    pending_.error = error;
  }
  cv_.notify_all();
}

}  // namespace hearth::serve
