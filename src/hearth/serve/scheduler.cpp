#include "hearth/serve/scheduler.h"

#include <optional>

#include "hearth/text/grammar_constraint.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "hearth/base/clock.h"
#include "hearth/base/log.h"

#include <fmt/format.h>
#include "hearth/head/generate.h"
#include "hearth/serve/stop_matcher.h"

namespace hearth::serve {

namespace {
constexpr std::chrono::milliseconds kDevicePoll{2000};

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}
}  // namespace

struct Scheduler::Slot {
  Slot(std::shared_ptr<Job> j, int64_t s, const text::Tokenizer& tok, int64_t vocab)
      : job(std::move(j)),
        seq(s),
        sampler(job->params().sampling),
        decoder(tok),
        stop(job->params().stop),
        logits(static_cast<size_t>(vocab)) {
    if (job->params().grammar) constraint.emplace(job->params().grammar, tok);
  }
  std::shared_ptr<Job> job;
  int64_t seq;                  // the job's sequence (KV cache) id
  size_t prefilled = 0;         // prompt tokens in the cache so far (evaluated or kept)
  std::vector<int32_t> tokens;  // what the sequence's cache holds, in order
  // Set back (paged KV ran out): everything its cache held, computed again before it goes on
  // decoding; `prefilled` then counts these. Empty otherwise.
  std::vector<int32_t> replay;
  bool computed = false;  // evaluated a chunk of its own (paged KV: then it shares no more)
  text::Sampler sampler;
  text::StreamDecoder decoder;
  StopMatcher stop;
  std::vector<int32_t> step;  // decoding: the tokens this pass feeds (last, then any drafts)
  // (vocab) f32 of the last evaluated token; (step.size(), vocab) with drafts
  std::vector<float> logits;
  std::optional<text::GrammarConstraint> constraint;  // with a grammar
  std::vector<float> masked;                          // (vocab) logits the grammar allows
  int32_t last = -1;                                  // sampled token to evaluate next
  int64_t n_generated = 0;
  std::vector<text::TokenLogprobs> logprobs;  // of tokens whose text is not emitted yet
  double t_first_ms = 0;
  bool done = false;
  bool keep = false;  // finished cleanly: its sequence may be kept for the prompt cache
  // The drafted trip being judged: its drafts and those accepted so far, counted (in the
  // job's usage and the metrics) before the request can finish, so a client that has its
  // answer also sees them.
  bool trip_open = false;
  int64_t trip_drafted = 0, trip_accepted = 0;
  int64_t draft_len = 0;  // drafts to ask for next (head::next_draft_length); 0: draft_max
};

Scheduler::Scheduler(head::LogitsSource& source, DeviceStatus& devices,
                     const text::Tokenizer& tokenizer, Metrics& metrics, SchedulerOptions options)
    : source_(source), devices_(devices), tokenizer_(tokenizer), metrics_(metrics), opt_(options) {
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || static_cast<int64_t>(waiting_.size()) >= opt_.max_queue) return false;
    job->set_arrival_ms(now_ms());
    waiting_.push_back(job);
    by_id_[job->id()] = job;
    metrics_.set_queue(static_cast<int64_t>(waiting_.size()), static_cast<int64_t>(active_.size()));
  }
  metrics_.request_started();
  metrics_.prompt_tokens(static_cast<int64_t>(job->params().prompt.size()));
  cv_.notify_all();
  return true;
}

bool Scheduler::cancel(const std::string& id) {
  std::shared_ptr<Job> job;
  {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    job = it->second.lock();
  }
  if (!job) return false;
  job->cancel();
  cv_.notify_all();
  return true;
}

void Scheduler::cancel_all() {
  {
    std::lock_guard lock(mu_);
    for (auto& [id, weak] : by_id_) {
      if (auto job = weak.lock()) job->cancel();
    }
  }
  cv_.notify_all();
}

void Scheduler::finish(Slot& s, const std::string& reason, const std::string& error) {
  if (s.done) return;
  s.done = true;
  if (reason != "error" && reason != "cancelled") {
    const std::string tail = s.stop.push(s.decoder.flush()) + s.stop.flush();
    if (!tail.empty() || !s.logprobs.empty()) {
      s.job->emit(tail, s.n_generated, std::move(s.logprobs));
    }
  }
  close_trip(s);
  s.job->finish(reason, error);
  metrics_.request_finished(reason);
  if (s.n_generated > 1) {
    metrics_.tpot((now_ms() - s.t_first_ms) / 1e3 / static_cast<double>(s.n_generated - 1));
  }
  // An error may leave the cache short of what `tokens` says: only a clean end is kept. The
  // sequence is kept or dropped when the slot leaves (loop()), so that a request finishing
  // inside a verified batch first has its cache cut back to the tokens kept.
  s.keep = reason != "error";
}

void Scheduler::close_trip(Slot& s) {
  if (!s.trip_open) return;
  s.trip_open = false;
  s.draft_len = head::next_draft_length(s.trip_drafted, s.trip_accepted, opt_.draft_max);
  metrics_.decode_trip(s.trip_drafted, s.trip_accepted);
  s.job->add_drafts(s.trip_drafted, s.trip_accepted);
}

void Scheduler::drop_sequence(int64_t seq) {
  try {
    if (opt_.drafter != nullptr) opt_.drafter->forget(seq);
    source_.drop(seq);
  } catch (const std::exception& e) {
    log::warn("serve: dropping sequence {}: {}", seq, e.what());
  }
}

void Scheduler::keep_or_drop(Slot& s, bool keep) {
  if (!keep || !opt_.prompt_cache || s.tokens.empty()) return drop_sequence(s.seq);
  kept_.push_back({s.seq, std::move(s.tokens)});
  while (static_cast<int>(kept_.size()) > opt_.parallel) {
    drop_sequence(kept_.front().seq);
    kept_.pop_front();
  }
}

const std::vector<int32_t>& Scheduler::feed(const Slot& s) {
  return s.replay.empty() ? s.job->params().prompt : s.replay;
}

size_t Scheduler::best_prefix(const std::vector<int32_t>& prompt, int64_t* seq,
                              int64_t self) const {
  *seq = -1;
  if (!opt_.prompt_cache) return 0;
  // Short of the whole prompt: its last token must be evaluated to give the first logits.
  const size_t limit = prompt.size() - std::min<size_t>(prompt.size(), 1);
  size_t best = 0;
  auto consider = [&](int64_t s, const std::vector<int32_t>& held) {
    const size_t common = std::min(common_prefix(held, prompt), limit);
    if (common > best) {
      best = common;
      *seq = s;
    }
  };
  for (const auto& k : kept_) consider(k.seq, k.tokens);
  for (const auto& a : active_) {
    if (!a->done && a->seq != self) consider(a->seq, a->tokens);
  }
  return best;
}

size_t Scheduler::share_longest_prefix(int64_t seq, const std::vector<int32_t>& prompt,
                                       size_t held) {
  int64_t src = -1;
  const size_t len = best_prefix(prompt, &src, seq);
  if (src < 0 || len <= held) return held;
  try {
    if (!source_.share_prefix(src, seq, static_cast<int64_t>(len))) return held;
  } catch (const std::exception& e) {
    log::warn("serve: sharing the prefix of sequence {}: {}", src, e.what());
    return held;
  }
  metrics_.prompt_tokens_cached(static_cast<int64_t>(len - held));
  return len;
}

bool Scheduler::share_or_wait(Slot& s) {
  const auto budget = source_.kv_budget();
  if (!budget || !opt_.prompt_cache || s.computed || !s.replay.empty()) return false;
  const auto& prompt = s.job->params().prompt;
  const size_t len = share_longest_prefix(s.seq, prompt, s.prefilled);
  if (len > s.prefilled) {
    s.prefilled = len;
    s.tokens.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(len));
    s.job->set_cached_tokens(static_cast<int64_t>(len));
  }
  // Requests that arrive together with one system prompt: the oldest computes it, the others
  // wait for it instead of computing it too.
  for (const auto& a : active_) {
    if (a.get() == &s) break;  // only older requests
    if (a->done || !a->replay.empty()) continue;
    const auto& other = a->job->params().prompt;
    if (a->prefilled >= other.size()) continue;  // its prompt is all cached already
    const size_t common = std::min(common_prefix(other, prompt), prompt.size() - 1);
    if (common >= s.prefilled + static_cast<size_t>(budget->block_rows) && common > a->prefilled) {
      return true;
    }
  }
  return false;
}

bool Scheduler::drop_oldest_kept() {
  if (kept_.empty()) return false;
  drop_sequence(kept_.front().seq);
  kept_.pop_front();
  return true;
}

bool Scheduler::room_for(const std::vector<int32_t>& prompt, int64_t* promised) {
  if (!source_.kv_budget()) return true;
  int64_t running = 0;  // blocks running requests still take for the rest of their prompts
  for (const auto& a : active_) {
    const auto& f = feed(*a);
    if (!a->done && a->prefilled < f.size()) {
      running += source_.kv_blocks_needed(a->seq, static_cast<int64_t>(f.size() - a->prefilled));
    }
  }
  while (true) {
    const auto budget = *source_.kv_budget();
    int64_t src = -1;
    const auto shared = static_cast<int64_t>(best_prefix(prompt, &src));
    const int64_t rows = budget.block_rows;
    // The prompt and the first generated token, less the whole blocks it points at.
    const int64_t need =
        (static_cast<int64_t>(prompt.size()) + 1 + rows - 1) / rows - shared / rows;
    if (need <= budget.available - running - *promised) {
      *promised += need;
      return true;
    }
    if (!drop_oldest_kept()) break;
  }
  // Nothing runs and nothing is promised: it goes in, and fails clearly if the pool can
  // never hold it (set_back_newest).
  return active_.empty() && *promised == 0;
}

void Scheduler::set_back_newest() {
  // The newest request whose cache gives blocks back; failing that (every block it holds is
  // shared), the newest that holds any: each one set back stops sharing, so the holders
  // dwindle until blocks come free.
  Slot* victim = nullptr;
  Slot* owner = nullptr;
  int holders = 0;
  for (auto& a : active_) {
    if (!a->done && source_.seq_length(a->seq) > 0) {
      victim = a.get();
      ++holders;
      if (source_.kv_blocks_owned(a->seq) > 0) owner = a.get();
    }
  }
  if (owner != nullptr) victim = owner;
  const auto budget = source_.kv_budget();
  const int64_t pool_positions = budget ? budget->capacity * budget->block_rows : 0;
  if (holders <= 1) {
    // One request (or none) holds the whole pool and still cannot go on: the pool is its
    // context. A reply under way ends as at a full context; a prompt that cannot fit fails.
    Slot* stuck = victim;
    for (auto& a : active_) {
      if (stuck == nullptr && !a->done) stuck = a.get();
    }
    if (stuck == nullptr) return;
    if (stuck->replay.empty() && stuck->prefilled == stuck->job->params().prompt.size()) {
      finish(*stuck, "length");
    } else {
      finish(*stuck, "error",
             fmt::format("the KV pool ({} positions, --kv-pool) cannot hold this request",
                         pool_positions));
    }
    return;
  }
  log::info(
      "serve: KV pool full; request {} waits for blocks and will compute its {} tokens "
      "again",
      victim->job->id(), victim->replay.empty() ? victim->tokens.size() : victim->replay.size());
  drop_sequence(victim->seq);
  victim->seq = next_seq_++;
  const bool in_prompt =
      victim->replay.empty() && victim->prefilled < victim->job->params().prompt.size();
  if (!in_prompt && victim->replay.empty()) victim->replay = victim->tokens;
  victim->tokens.clear();
  victim->prefilled = 0;
  victim->computed = true;  // it computes everything again: sharing back in would free nothing
  metrics_.requests_set_back(1);
}

int64_t Scheduler::claim_sequence(const std::vector<int32_t>& prompt, size_t* reused) {
  *reused = 0;
  if (source_.kv_budget()) {
    // Paged: the new sequence points at the blocks of the longest prefix any cached sequence
    // holds (a running request's or a kept one), which stay where they are.
    const int64_t seq = next_seq_++;
    *reused = share_longest_prefix(seq, prompt, 0);
    while (!kept_.empty() && static_cast<int>(active_.size() + kept_.size()) >= opt_.parallel) {
      drop_oldest_kept();
    }
    return seq;
  }
  // The longest common prefix, short of the whole prompt: its last token must be evaluated
  // now to give the logits of the first generated one.
  auto best = kept_.end();
  size_t best_len = 0;
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    const size_t common = std::min(common_prefix(it->tokens, prompt),
                                   prompt.size() - std::min<size_t>(prompt.size(), 1));
    if (common > best_len) {
      best = it;
      best_len = common;
    }
  }
  if (best != kept_.end()) {
    const int64_t seq = best->seq;
    kept_.erase(best);
    try {
      source_.truncate(seq, static_cast<int64_t>(best_len));
      *reused = best_len;
      metrics_.prompt_tokens_cached(static_cast<int64_t>(best_len));
      return seq;
    } catch (const std::exception& e) {
      log::warn("serve: reusing sequence {}: {}", seq, e.what());
      drop_sequence(seq);
    }
  }
  // A new sequence: the source holds at most --parallel (kept ones included).
  while (!kept_.empty() && static_cast<int>(active_.size() + kept_.size()) >= opt_.parallel) {
    drop_sequence(kept_.front().seq);
    kept_.pop_front();
  }
  return next_seq_++;
}

bool Scheduler::sample_next(Slot& s, const float* row, int32_t draft) {
  const JobParams& p = s.job->params();
  const std::span<const float> logits(row, static_cast<size_t>(source_.vocab()));
  std::span<const float> use = logits;
  if (s.constraint) {
    s.masked.assign(logits.begin(), logits.end());
    if (s.constraint->mask(s.masked) == 0) {
      finish(s, "error", "the grammar allows no token of this vocabulary here");
      return false;
    }
    use = s.masked;
  }
  text::Sampler::Verdict v{-1, false};
  if (draft >= 0) {
    v = s.sampler.verify(use, draft);
    if (v.accepted) ++s.trip_accepted;
  } else {
    v.id = s.sampler.sample(use);
  }
  const int32_t id = v.id;
  if (s.constraint) s.constraint->accept(id);
  s.sampler.accept(id);
  if (p.logprobs >= 0 && (p.ignore_eos || !tokenizer_.is_eog(id))) {
    s.logprobs.push_back(text::token_logprobs(logits, id, p.logprobs));
  }
  if (s.n_generated == 0) {
    s.t_first_ms = now_ms();
    metrics_.ttft((s.t_first_ms - s.job->arrival_ms()) / 1e3);
  }
  if (!p.ignore_eos && tokenizer_.is_eog(id)) {
    finish(s, "stop");
    return v.accepted;
  }
  ++s.n_generated;
  metrics_.generated_tokens(1);
  const std::string text = s.stop.push(s.decoder.push(id));
  if (!text.empty() || s.n_generated == 1) {
    s.job->emit(text, s.n_generated, std::move(s.logprobs));
    s.logprobs.clear();
  }
  if (s.stop.stopped() || (s.constraint && s.constraint->finished())) {
    finish(s, "stop");
  } else if ((p.max_tokens >= 0 && s.n_generated >= p.max_tokens) ||
             static_cast<int64_t>(s.tokens.size()) + 1 > source_.n_ctx()) {
    finish(s, "length");
  } else {
    s.last = id;
  }
  return v.accepted;
}

void Scheduler::draft_for(Slot& s) {
  s.step.assign(1, s.last);
  if (opt_.drafter == nullptr) return;
  const JobParams& p = s.job->params();
  // Drafts beyond the context's room or the tokens still to generate would be wasted.
  if (s.draft_len == 0) s.draft_len = opt_.draft_max;
  int64_t room =
      std::min<int64_t>(s.draft_len, source_.n_ctx() - static_cast<int64_t>(s.tokens.size()) - 1);
  if (p.max_tokens >= 0) room = std::min<int64_t>(room, p.max_tokens - s.n_generated - 1);
  if (room <= 0) return;
  std::vector<int32_t> drafts;
  s.tokens.push_back(s.last);  // the drafter sees the token this step feeds
  try {
    drafts = opt_.drafter->draft(s.seq, s.tokens, static_cast<int>(room));
  } catch (const std::exception& e) {
    // Drafting only saves time: a failing drafter leaves the request to plain decoding.
    log::warn("serve: drafting for request {}: {}", s.job->id(), e.what());
    drafts.clear();
  }
  s.tokens.pop_back();
  if (static_cast<int64_t>(drafts.size()) < std::max(opt_.draft_min, 1)) return;
  drafts.resize(std::min<size_t>(drafts.size(), static_cast<size_t>(room)));
  s.step.insert(s.step.end(), drafts.begin(), drafts.end());
}

void Scheduler::verify_drafts(Slot& s, size_t cache_before) {
  const int64_t vocab = source_.vocab();
  const auto m = static_cast<int64_t>(s.step.size()) - 1;
  // Row j of the logits follows step[0..j]; `tokens` grows with each token judged, so it
  // always says what the cache keeps should this row's token be the last one chosen.
  s.tokens.resize(cache_before);
  s.trip_open = true;
  s.trip_drafted = m;
  s.trip_accepted = 0;
  int64_t j = 0;
  for (; j <= m; ++j) {
    s.tokens.push_back(s.step[static_cast<size_t>(j)]);
    const float* row = s.logits.data() + j * vocab;
    if (j == m) {  // every draft passed: the last row gives one more token
      sample_next(s, row);
      break;
    }
    const bool ok = sample_next(s, row, s.step[static_cast<size_t>(j + 1)]);
    if (!ok || s.done) break;
  }
  close_trip(s);
  if (j < m) source_.truncate(s.seq, static_cast<int64_t>(s.tokens.size()));
}

void Scheduler::step() {
  std::vector<Slot*> batch;            // slots in this pass, in item order
  std::vector<size_t> chunk;           // prompt tokens each slot evaluates (0: decode)
  std::vector<model::EvalItem> items;  // (batch.size())
  const size_t chunk_max = static_cast<size_t>(std::max(1, opt_.prefill_chunk));
  size_t prefill_used = 0;  // prompt tokens in this pass
  // Paged KV: rows go in while the pool has their blocks (kept sequences let go first); a
  // slot whose rows do not fit waits for a later step.
  const bool paged = source_.kv_budget().has_value();
  int64_t taken = 0;  // blocks this pass's rows take
  bool stalled = false;
  auto take_blocks = [&](const Slot& s, size_t n) {
    if (!paged) return true;
    const int64_t need = source_.kv_blocks_needed(s.seq, static_cast<int64_t>(n));
    while (need > source_.kv_budget()->available - taken && drop_oldest_kept()) {
    }
    if (need > source_.kv_budget()->available - taken) return false;
    taken += need;
    return true;
  };
  for (auto& sp : active_) {
    Slot& s = *sp;
    if (s.done) continue;
    if (s.job->cancelled()) {
      finish(s, "cancelled");
      continue;
    }
    if (share_or_wait(s)) continue;
    const auto& prompt = feed(s);
    if (s.prefilled < prompt.size()) {
      // Chunks always start at multiples of prefill_chunk from the first prompt token not
      // already cached, whatever else runs, so a request is computed in the same pieces alone
      // or among others. Short prompts share a step while their chunks fit the budget; the
      // first one always runs.
      const size_t n = std::min(prompt.size() - s.prefilled, chunk_max);
      if (prefill_used > 0 && prefill_used + n > chunk_max) continue;  // a later step
      // The HTTP layer refuses prompts that do not fit; should one slip through, it fails
      // alone instead of taking the whole pass (and every other request) down with it.
      if (source_.seq_length(s.seq) + static_cast<int64_t>(n) > source_.n_ctx()) {
        finish(s, "error", "the prompt does not fit in the context");
        continue;
      }
      if (!take_blocks(s, n)) {
        stalled = true;
        continue;
      }
      prefill_used += n;
      items.push_back(
          {s.seq, std::span<const int32_t>(prompt.data() + s.prefilled, n), s.logits.data()});
      chunk.push_back(n);
    } else {
      draft_for(s);
      if (!take_blocks(s, s.step.size())) {
        s.step.resize(1);  // without its drafts, it may still fit
        if (!take_blocks(s, 1)) {
          stalled = true;
          continue;
        }
      }
      s.logits.resize(s.step.size() * static_cast<size_t>(source_.vocab()));
      model::EvalItem item{s.seq, s.step, s.logits.data()};
      item.all_logits = s.step.size() > 1;
      items.push_back(item);
      chunk.push_back(0);
    }
    batch.push_back(&s);
  }
  if (items.empty()) {
    if (stalled) set_back_newest();
    return;
  }
  try {
    if (opt_.batched) {
      source_.eval_batch(items);
    } else {
      for (const auto& it : items) source_.eval_batch(std::span<const model::EvalItem>(&it, 1));
    }
  } catch (const std::exception& e) {
    // The pass is all or nothing: every sequence in it lost its step.
    for (Slot* s : batch) {
      log::warn("serve: request {} failed: {}", s->job->id(), e.what());
      finish(*s, "error", e.what());
    }
    return;
  }
  metrics_.batch(static_cast<int64_t>(batch.size()), [&] {
    int64_t rows = 0;
    for (const auto& it : items) rows += static_cast<int64_t>(it.tokens.size());
    return rows;
  }());
  for (size_t i = 0; i < batch.size(); ++i) {
    Slot& s = *batch[i];
    const size_t cache_before = s.tokens.size();
    try {
      if (chunk[i] > 0) {
        s.computed = true;
        s.tokens.insert(s.tokens.end(), items[i].tokens.begin(), items[i].tokens.end());
        s.prefilled += chunk[i];
        if (!s.replay.empty()) {
          // Set back and computed again: it decodes on from its last token.
          if (s.prefilled == s.replay.size()) {
            s.replay.clear();
            s.prefilled = s.job->params().prompt.size();
            if (opt_.drafter != nullptr) opt_.drafter->prepare(s.seq, s.tokens);
          }
        } else if (s.prefilled == s.job->params().prompt.size()) {
          if (opt_.drafter != nullptr) opt_.drafter->prepare(s.seq, s.tokens);
          sample_next(s, s.logits.data());
        }
      } else if (s.step.size() > 1) {
        verify_drafts(s, cache_before);
      } else {
        s.tokens.push_back(s.last);
        metrics_.decode_trip(0, 0);
        sample_next(s, s.logits.data());
      }
    } catch (const std::exception& e) {
      log::warn("serve: request {} failed: {}", s.job->id(), e.what());
      finish(s, "error", e.what());
    }
  }
}

void Scheduler::poll_devices() {
  try {
    metrics_.set_devices(devices_.device_pressure());
  } catch (const std::exception& e) {
    log::warn("serve: reading device memory pressure: {}", e.what());
  }
}

void Scheduler::loop() {
  double last_poll_ms = now_ms();
  poll_devices();
  std::vector<std::shared_ptr<Job>> admitted;  // jobs leaving the queue this round
  while (true) {
    {
      std::unique_lock lock(mu_);
      // Idle, wake every kDevicePoll anyway to refresh the devices' memory pressure.
      cv_.wait_for(lock, kDevicePoll,
                   [&] { return stopping_ || !active_.empty() || !waiting_.empty(); });
      if (stopping_) break;
      // Jobs cancelled while waiting leave the queue at once.
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if ((*it)->cancelled()) {
          (*it)->finish("cancelled");
          metrics_.request_finished("cancelled");
          by_id_.erase((*it)->id());
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      // Past the queue's deadline: 503 with Retry-After.
      if (opt_.queue_timeout_s > 0) {
        const double now = now_ms();
        for (auto it = waiting_.begin(); it != waiting_.end();) {
          if (now - (*it)->arrival_ms() > opt_.queue_timeout_s * 1e3) {
            (*it)->refuse_busy(fmt::format(
                "the request waited {:.0f} s in the queue (--queue-timeout) without a free {}",
                (now - (*it)->arrival_ms()) / 1e3,
                source_.kv_budget() ? "slot or KV block" : "slot"));
            metrics_.request_finished("busy");
            by_id_.erase((*it)->id());
            it = waiting_.erase(it);
          } else {
            ++it;
          }
        }
      }
    }
    // First in, first out: a request the KV pool cannot take yet holds back those behind it.
    int64_t promised = 0;  // blocks promised to the requests admitted here
    while (true) {
      std::shared_ptr<Job> next;
      {
        std::lock_guard lock(mu_);
        if (waiting_.empty() ||
            static_cast<int>(active_.size() + admitted.size()) >= opt_.parallel) {
          break;
        }
        next = waiting_.front();
      }
      if (!room_for(next->params().prompt, &promised)) break;
      std::lock_guard lock(mu_);
      waiting_.pop_front();  // only this thread takes jobs out, so it is still `next`
      admitted.push_back(std::move(next));
    }
    // Sequences are claimed outside the lock: reusing or dropping one talks to the ring.
    for (auto& job : admitted) {
      job->start();
      size_t reused = 0;
      const int64_t seq = claim_sequence(job->params().prompt, &reused);
      auto slot = std::make_unique<Slot>(std::move(job), seq, tokenizer_, source_.vocab());
      slot->prefilled = reused;
      slot->job->set_cached_tokens(static_cast<int64_t>(reused));
      slot->tokens.assign(slot->job->params().prompt.begin(),
                          slot->job->params().prompt.begin() + static_cast<std::ptrdiff_t>(reused));
      active_.push_back(std::move(slot));
    }
    admitted.clear();
    {
      std::lock_guard lock(mu_);
      metrics_.set_queue(static_cast<int64_t>(waiting_.size()),
                         static_cast<int64_t>(active_.size()));
    }
    if (now_ms() - last_poll_ms >= kDevicePoll.count()) {
      if (active_.empty()) devices_.idle();
      poll_devices();
      last_poll_ms = now_ms();
    }
    step();
    if (const auto b = source_.kv_budget()) {
      metrics_.set_kv_blocks(b->capacity - b->available, b->capacity, b->block_rows);
    }
    std::vector<std::string> finished;
    for (auto& s : active_) {
      if (s->done) finished.push_back(s->job->id());
    }
    if (!finished.empty()) {
      for (auto& s : active_) {
        if (s->done) keep_or_drop(*s, s->keep);
      }
      std::erase_if(active_, [](const auto& s) { return s->done; });
      std::lock_guard lock(mu_);
      for (const auto& id : finished) by_id_.erase(id);
      metrics_.set_queue(static_cast<int64_t>(waiting_.size()),
                         static_cast<int64_t>(active_.size()));
    }
    devices_.after_step();
  }
  // Shutting down: nobody will compute the rest.
  for (auto& s : active_) {
    finish(*s, "error", "the server is shutting down");
    keep_or_drop(*s, false);
  }
  for (const auto& k : kept_) drop_sequence(k.seq);
  kept_.clear();
  std::lock_guard lock(mu_);
  for (auto& j : waiting_) j->finish("error", "the server is shutting down");
  waiting_.clear();
}

}  // namespace hearth::serve
