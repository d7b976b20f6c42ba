#include "hearth/model/perplexity.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "hearth/base/error.h"
#include "hearth/model/batch.h"

namespace hearth::model {

double PerplexityResult::ppl() const {
  return scored == 0 ? 0.0 : std::exp(nll_sum / static_cast<double>(scored));
}

double PerplexityResult::ppl_error() const {
  if (scored < 2) return 0.0;
  const double n = static_cast<double>(scored);
  const double mean = nll_sum / n;
  const double var = std::max(0.0, nll2_sum / n - mean * mean);
  return ppl() * std::sqrt(var / (n - 1));
}

void log_softmax(std::span<const float> logits, std::span<float> out) {
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
  const double log_z = mx + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i)
    out[i] = static_cast<float>(static_cast<double>(logits[i]) - log_z);
}

PerplexityResult perplexity(Engine& engine, std::span<const int32_t> tokens,
                            const PerplexityOptions& o, int64_t seq,
                            const ScoredTokenFn& on_token) {
  if (o.n_ctx < 4) throw UsageError(fmt::format("perplexity: context {} is too small", o.n_ctx));
  if (o.n_ctx > engine.n_ctx()) {
    throw UsageError(fmt::format("perplexity: chunks of {} tokens exceed the engine's context {}",
                                 o.n_ctx, engine.n_ctx()));
  }
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  int64_t n_chunks = n_tokens / o.n_ctx;
  if (n_chunks == 0) {
    throw UsageError(fmt::format(
        "perplexity: the text has {} tokens, fewer than one chunk of {} (give more text or a "
        "smaller -c)",
        n_tokens, o.n_ctx));
  }
  if (o.max_chunks > 0) n_chunks = std::min(n_chunks, o.max_chunks);
  const auto& hp = engine.hparams();
  const int64_t vocab = hp.vocab, dim = hp.dim;
  const int64_t first = o.n_ctx / 2;  // rows [first, n_ctx - 1) predict tokens first + 1 ..
  std::vector<int32_t> chunk(static_cast<size_t>(o.n_ctx));
  std::vector<float> hidden(static_cast<size_t>(o.n_ctx * dim));
  const int64_t n_scored_rows = o.n_ctx - 1 - first;
  std::vector<float> logits(static_cast<size_t>(n_scored_rows * vocab));
  std::vector<float> lp(static_cast<size_t>(vocab));
  PerplexityResult r;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t start = c * o.n_ctx;
    std::copy_n(tokens.begin() + start, o.n_ctx, chunk.begin());
    if (o.bos >= 0) chunk[0] = o.bos;
    engine.drop(seq);
    engine.embed(chunk, hidden.data());
    const BatchSegment segment{seq, 0, o.n_ctx};
    engine.forward_batch({&segment, 1}, 0, static_cast<int>(hp.n_layers), hidden.data());
    engine.logits_rows(hidden.data() + first * dim, n_scored_rows, logits.data());
    for (int64_t j = 0; j < n_scored_rows; ++j) {
      log_softmax({logits.data() + j * vocab, static_cast<size_t>(vocab)}, lp);
      const int64_t index = start + first + j + 1;  // the token row first + j predicts
      const int32_t token = tokens[static_cast<size_t>(index)];
      const double nll = -static_cast<double>(lp[static_cast<size_t>(token)]);
      r.nll_sum += nll;
      r.nll2_sum += nll * nll;
      ++r.scored;
      if (on_token) on_token(c, index, token, lp);
    }
    ++r.chunks;
  }
  engine.drop(seq);
  return r;
}

}  // namespace hearth::model
