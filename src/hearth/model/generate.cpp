#include "hearth/model/generate.h"

#include <optional>

#include "hearth/text/grammar_constraint.h"

#include <fmt/core.h>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/model/engine.h"

namespace hearth::model {

void LocalSource::eval(int64_t seq, std::span<const int32_t> tokens, float* logits) {
  engine_.eval(seq, tokens, logits);
}
int64_t LocalSource::vocab() const {
  return engine_.hparams().vocab;
}
int64_t LocalSource::n_ctx() const {
  return engine_.n_ctx();
}
int64_t LocalSource::seq_length(int64_t seq) const {
  return engine_.seq_length(seq);
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
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  std::vector<float> logits(source.vocab());
  text::Sampler sampler(params.sampling);
  for (int32_t id : prompt) sampler.accept(id);
  text::StreamDecoder decoder(tokenizer);

  const double t0 = now_ms();
  source.eval(params.seq, prompt, logits.data());
  const double t_prefill = now_ms();
  r.prefill_tok_s = prompt.size() / std::max(1e-9, (t_prefill - t0) / 1e3);
  double t_first = 0;
  r.stop_reason = "length";
  std::optional<text::GrammarConstraint> constraint;
  if (params.grammar) constraint.emplace(params.grammar, tokenizer);
  for (int32_t i = 0; params.n_predict < 0 || i < params.n_predict; ++i) {
    if (constraint && constraint->mask(logits) == 0) {
      throw UsageError("the grammar allows no token of this vocabulary here");
    }
    const int32_t id = sampler.sample(logits);
    if (constraint) constraint->accept(id);
    if (i == 0) {
      t_first = now_ms();
      r.ttft_ms = t_first - t0;
    }
    sampler.accept(id);
    if (params.stop_at_eog && tokenizer.is_eog(id)) {
      r.stop_reason = "eog";
      break;
    }
    r.ids.push_back(id);
    const std::string piece = decoder.push(id);
    r.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (constraint && constraint->finished()) {
      r.stop_reason = "grammar";
      break;
    }
    if (params.n_predict >= 0 && i + 1 >= params.n_predict) break;
    if (source.seq_length(params.seq) + 1 > source.n_ctx()) {
      r.stop_reason = "context";
      break;
    }
    source.eval(params.seq, std::span<const int32_t>(&id, 1), logits.data());
  }
  const std::string tail = decoder.flush();
  r.text += tail;
  if (on_text && !tail.empty()) on_text(tail);
  if (r.ids.size() > 1) r.tpot_ms = (now_ms() - t_first) / static_cast<double>(r.ids.size() - 1);
  return r;
}

}  // namespace hearth::model
