// Perplexity of a text under a model, computed as llama.cpp's perplexity tool does, so the
// figures compare: the tokens are cut into chunks of n_ctx, each chunk starts with BOS (when
// the vocabulary adds one) and is evaluated from an empty cache, and only the second half of
// each chunk is scored (every scored token has at least n_ctx / 2 tokens of context).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "hearth/model/engine.h"

namespace hearth::model {

struct PerplexityOptions {
  int64_t n_ctx = 512;     // tokens per chunk (<= the engine's context)
  int64_t max_chunks = 0;  // 0: every whole chunk
  int32_t bos = -1;        // >= 0: the first token of every chunk becomes this
};

struct PerplexityResult {
  int64_t chunks = 0;
  int64_t scored = 0;        // tokens scored
  double nll_sum = 0;        // sum of -log p(token)
  double nll2_sum = 0;       // sum of (-log p)^2, for the error estimate
  double ppl() const;        // exp(mean nll)
  double ppl_error() const;  // standard error of ppl (delta method, as llama.cpp)
};

// For each scored token: its chunk, the index of the token in the whole text, and the model's
// log-probabilities (vocab) for it. May be empty.
using ScoredTokenFn = std::function<void(int64_t chunk, int64_t token_index, int32_t token,
                                         std::span<const float> log_probs)>;

// Evaluates `tokens` chunk by chunk on sequence `seq` of `engine` (its cache is cleared per
// chunk). UsageError when the text is shorter than one chunk (names both lengths).
PerplexityResult perplexity(Engine& engine, std::span<const int32_t> tokens,
                            const PerplexityOptions& options, int64_t seq = 0,
                            const ScoredTokenFn& on_token = {});

// log-softmax of `logits` in double, stored as float.
void log_softmax(std::span<const float> logits, std::span<float> out);

}  // namespace hearth::model
