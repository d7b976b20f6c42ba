// Token sampling: a fixed chain configured by a plain struct.
//
// Chain (llama.cpp's default order): penalties over the last N accepted tokens -> top-k ->
// top-p -> min-p -> temperature -> draw. With temperature <= 0 the draw is greedy: argmax
// after penalties, lowest index on ties.
//
// Reproducibility: the generator is std::mt19937_64 seeded with `seed`; each draw takes one
// 64-bit output r, forms u = (r >> 11) * 2^-53 in [0, 1), and picks the first candidate
// (candidates sorted by logit descending, then index ascending) whose cumulative
// probability exceeds u. The same seed, logits and history give the same ids anywhere.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace hearth::text {

struct SamplerParams {
  float temperature = 0.8f;        // <= 0: greedy
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off; keeps p >= min_p * p_max
  float repeat_penalty = 1.0f;     // 1: off; logit > 0 divided by it, else multiplied
  float frequency_penalty = 0.0f;  // subtracted once per occurrence in the window
  float presence_penalty = 0.0f;   // subtracted once if present in the window
  int32_t penalty_last_n = 64;     // window of accepted tokens; 0: off, -1: all
  uint64_t seed = 0;
  // Added to those tokens' logits before anything else (OpenAI's logit_bias: -100 bans a
  // token, +100 all but forces it). Ids outside the logits are ignored.
  std::vector<std::pair<int32_t, float>> logit_bias;
};

// The model's log-probabilities at one step: of the chosen token, and of the `top_n` most
// likely (highest first, lowest id first on ties). Log-softmax of the logits as the model
// gives them (before penalties, bias and temperature).
struct TokenLogprobs {
  int32_t id = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob)
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top_n);

// Argmax with the lowest index winning ties. UsageError on empty logits.
int32_t sample_greedy(std::span<const float> logits);

class Sampler {
 public:
  // UsageError when a parameter is out of range (negative temperature is allowed: greedy).
  explicit Sampler(const SamplerParams& params);

  // logits: (n_vocab) f32, not modified. Returns the chosen token id.
  int32_t sample(std::span<const float> logits);

  // Speculative decoding: judges a drafted token against the target's logits at its position.
  // Greedy: accepted when it is the argmax; the verdict's id is the argmax either way.
  // Sampling: accepted with probability p(draft) under this chain; when rejected, the id is
  // drawn from the chain's distribution without the draft, renormalised. Either way the id
  // is distributed as sample()'s (the draft is a point mass, so min(1, p/q) = p and the
  // residual max(0, p - q) is p without the draft), whatever the drafter proposed.
  struct Verdict {
    int32_t id;
    bool accepted;
  };
  Verdict verify(std::span<const float> logits, int32_t draft);

  // The distribution sample() draws from (candidates that survive the chain, with their
  // probabilities; one at probability 1 when greedy). Draws nothing.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits);
  // Adds a token (prompt or generated) to the penalty window.
  void accept(int32_t id);
  // Clears the window and re-seeds the generator.
  void reset();

  const SamplerParams& params() const { return params_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
  };
  void apply_penalties(std::vector<Candidate>& cands) const;
  // Runs the chain: the first n of cands_ survive, with probabilities probs_ (sum 1).
  size_t prepare(std::span<const float> logits);
  double uniform();  // one draw in [0, 1) (see the header comment)

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::deque<int32_t> history_;   // last penalty_last_n accepted ids
  std::vector<Candidate> cands_;  // (n_vocab) scratch
  std::vector<double> probs_;     // (survivors) f64
};

}  // namespace hearth::text
