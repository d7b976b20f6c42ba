#include "hearth/head/generate.h"

#include <fmt/core.h>

#include <optional>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/head/drafter.h"
#include "hearth/model/engine.h"
#include "hearth/text/grammar_constraint.h"

namespace hearth::head {

namespace {

// One generation's state: the sampler, grammar and text stream, and what has been emitted.
// Both loops (one token per trip, or drafts verified per trip) choose and emit through it.
class TokenLoop {
 public:
  TokenLoop(const text::Tokenizer& tokenizer, std::span<const int32_t> prompt,
            const GenerateParams& params, const std::function<void(std::string_view)>& on_text,
            GenerateResult& r)
      : tokenizer_(tokenizer),
        params_(params),
        on_text_(on_text),
        r_(r),
        sampler_(params.sampling),
        decoder_(tokenizer) {
    for (int32_t id : prompt) sampler_.accept(id);
    if (params.grammar) constraint_.emplace(params.grammar, tokenizer);
  }

  // The token at a position whose logits are `row` (vocab): sampled, or the verdict on
  // `draft` (>= 0). The grammar masks the row first (a copy: the row stays as it was).
  text::Sampler::Verdict choose(const float* row, int32_t draft) {
    const std::span<const float> logits(row, scratch_.size());
    std::span<const float> use = logits;
    if (constraint_) {
      std::copy(logits.begin(), logits.end(), scratch_.begin());
      if (constraint_->mask(scratch_) == 0) {
        throw UsageError("the grammar allows no token of this vocabulary here");
      }
      use = scratch_;
    }
    return draft >= 0 ? sampler_.verify(use, draft)
                      : text::Sampler::Verdict{sampler_.sample(use), false};
  }

  // Takes `id` as the next token; true when generation stops here (stop_reason set).
  bool emit(int32_t id) {
    if (constraint_) constraint_->accept(id);
    if (!first_) {
      first_ = true;
      r_.ttft_ms = now_ms() - t0_;
      t_first_ = now_ms();
    }
    sampler_.accept(id);
    if (params_.stop_at_eog && tokenizer_.is_eog(id)) {
      r_.stop_reason = "eog";
      return true;
    }
    r_.ids.push_back(id);
    const std::string piece = decoder_.push(id);
    r_.text += piece;
    if (on_text_ && !piece.empty()) on_text_(piece);
    if (constraint_ && constraint_->finished()) {
      r_.stop_reason = "grammar";
      return true;
    }
    if (params_.n_predict >= 0 && static_cast<int64_t>(r_.ids.size()) >= params_.n_predict) {
      r_.stop_reason = "length";
      return true;
    }
    return false;
  }

  void start(double t0, int64_t vocab) {
    t0_ = t0;
    scratch_.resize(static_cast<size_t>(vocab));
  }
  void finish() {
    const std::string tail = decoder_.flush();
    r_.text += tail;
    if (on_text_ && !tail.empty()) on_text_(tail);
    if (r_.ids.size() > 1) {
      r_.tpot_ms = (now_ms() - t_first_) / static_cast<double>(r_.ids.size() - 1);
    }
  }

 private:
  const text::Tokenizer& tokenizer_;
  const GenerateParams& params_;
  const std::function<void(std::string_view)>& on_text_;
  GenerateResult& r_;
  text::Sampler sampler_;
  text::StreamDecoder decoder_;
  std::optional<text::GrammarConstraint> constraint_;
  std::vector<float> scratch_;  // (vocab) a row masked by the grammar
  double t0_ = 0, t_first_ = 0;
  bool first_ = false;
};

}  // namespace

int64_t next_draft_length(int64_t asked, int64_t accepted, int64_t draft_max) {
  // Drafts that keep passing earn longer trips; after a rejection the next trip asks for one
  // more than this one kept, so a drafter that seldom agrees costs little verification.
  return accepted >= asked ? std::min(asked + 2, draft_max) : std::max<int64_t>(accepted + 1, 1);
}

double tokens_per_trip(const GenerateResult& r) {
  const double after_first = std::max(0.0, static_cast<double>(r.ids.size()) - 1.0);
  return r.trips > 0 ? after_first / static_cast<double>(r.trips) : 0.0;
}

GenerateResult generate(LogitsSource& source, const text::Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateParams& params,
                        const std::function<void(std::string_view)>& on_text) {
  GenerateResult r;
  if (prompt.empty()) throw UsageError("the prompt has no tokens");
  const int64_t start = source.seq_length(params.seq);
  if (start + static_cast<int64_t>(prompt.size()) > source.n_ctx()) {
    throw UsageError(
        fmt::format("the prompt ({} tokens, {} already in context) does not fit in the "
                    "context of {} tokens (use -c)",
                    prompt.size(), start, source.n_ctx()));
  }
  if (params.drafter != nullptr && params.draft_max < 1) {
    throw UsageError(fmt::format("--draft-max must be >= 1 (got {})", params.draft_max));
  }
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  r.stop_reason = "length";
  const int64_t vocab = source.vocab();
  TokenLoop loop(tokenizer, prompt, params, on_text, r);
  // The sequence's tokens as the drafter sees them: earlier turns, the prompt, and each token
  // as it is emitted.
  std::vector<int32_t> context;
  if (params.drafter != nullptr) {
    context.assign(params.past.begin(), params.past.end());
    context.insert(context.end(), prompt.begin(), prompt.end());
  }
  std::vector<float> logits(static_cast<size_t>(vocab));  // (1 + draft_max, vocab) with drafts

  const double t0 = now_ms();
  loop.start(t0, vocab);
  source.eval(params.seq, prompt, logits.data());
  r.prefill_tok_s = prompt.size() / std::max(1e-9, (now_ms() - t0) / 1e3);
  // A draft model reads the prompt now, as part of the time to the first token.
  if (params.drafter != nullptr && params.n_predict != 0)
    params.drafter->prepare(params.seq, context);
  if (params.n_predict == 0) return r;
  int32_t id = loop.choose(logits.data(), -1).id;
  bool stop = loop.emit(id);
  int64_t draft_len = params.draft_max;  // drafts to ask for next (next_draft_length)
  while (!stop) {
    // The chosen token is not in the cache yet; it goes in with the drafts after it.
    const int64_t len = source.seq_length(params.seq);
    if (len + 1 > source.n_ctx()) {
      r.stop_reason = "context";
      break;
    }
    std::vector<int32_t> batch{id};
    if (params.drafter != nullptr) {
      context.push_back(id);
      // Drafts beyond the tokens still to generate or the context's room would be wasted.
      int64_t room = std::min<int64_t>(draft_len, source.n_ctx() - len - 1);
      if (params.n_predict >= 0) {
        room = std::min<int64_t>(room, params.n_predict - static_cast<int64_t>(r.ids.size()) - 1);
      }
      if (room > 0) {
        const double t_draft = now_ms();
        const auto drafts = params.drafter->draft(params.seq, context, static_cast<int>(room));
        r.draft_ms += now_ms() - t_draft;
        if (static_cast<int64_t>(drafts.size()) >= std::max<int64_t>(params.draft_min, 1))
          batch.insert(
              batch.end(), drafts.begin(),
              drafts.begin() + std::min<int64_t>(room, static_cast<int64_t>(drafts.size())));
      }
    }
    const auto n_drafts = static_cast<int64_t>(batch.size()) - 1;
    logits.resize(static_cast<size_t>((n_drafts + 1) * vocab));
    source.eval(params.seq, batch, logits.data(), /*all=*/n_drafts > 0);
    ++r.trips;
    r.drafted += n_drafts;
    const int64_t accepted_before = r.accepted;
    // Row j holds the logits after batch[0..j]: judge draft j against it. The first
    // rejected draft is replaced by the verdict's token and the cache forgets from it on
    // (the token just chosen stays out of it, as in the plain loop); so does a stop at a
    // draft. When all pass, the last row gives one more token.
    bool all_passed = true;
    for (int64_t j = 0; j < n_drafts; ++j) {
      const auto v = loop.choose(logits.data() + j * vocab, batch[j + 1]);
      id = v.id;
      stop = loop.emit(id);
      if (v.accepted) ++r.accepted;
      if (!v.accepted || stop) {
        source.truncate(params.seq, len + 1 + j);
        all_passed = false;
        break;
      }
      context.push_back(id);
    }
    if (all_passed) {
      id = loop.choose(logits.data() + n_drafts * vocab, -1).id;
      stop = loop.emit(id);
    }
    if (n_drafts > 0) {
      draft_len = next_draft_length(n_drafts, r.accepted - accepted_before, params.draft_max);
    }
  }
  loop.finish();
  return r;
}

}  // namespace hearth::head
