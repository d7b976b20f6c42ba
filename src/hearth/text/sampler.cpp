#include "hearth/text/sampler.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "hearth/base/error.h"

namespace hearth::text {

int32_t sample_greedy(std::span<const float> logits) {
  if (logits.empty()) throw UsageError("sampler: empty logits");
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the first maximum wins
  return static_cast<int32_t>(best);
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int top_n) {
  if (logits.empty()) throw UsageError("logprobs: empty logits");
  if (chosen < 0 || static_cast<size_t>(chosen) >= logits.size()) {
    throw UsageError(fmt::format("logprobs: token {} is outside the logits", chosen));
  }
  // log p_i = l_i - (max + log sum exp(l_j - max)), summed in double.
  const float max_l = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_l);
  const double lse = max_l + std::log(sum);
  TokenLogprobs out;
  out.id = chosen;
  out.logprob = static_cast<float>(logits[static_cast<size_t>(chosen)] - lse);
  const size_t k = std::min(logits.size(), static_cast<size_t>(std::max(top_n, 0)));
  if (k > 0) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int32_t a, int32_t b) {
                        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
                      });
    for (size_t i = 0; i < k; ++i) {
      out.top.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - lse));
    }
  }
  return out;
}

Sampler::Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {
  if (std::isnan(params.temperature)) throw UsageError("sampler: temperature is NaN");
  if (!(params.top_p > 0.0f)) {
    throw UsageError(fmt::format("sampler: top_p must be > 0 (got {})", params.top_p));
  }
  if (!(params.repeat_penalty > 0.0f)) {
    throw UsageError(
        fmt::format("sampler: repeat_penalty must be > 0 (got {})", params.repeat_penalty));
  }
  if (params.penalty_last_n < -1) {
    throw UsageError(
        fmt::format("sampler: penalty_last_n must be >= -1 (got {})", params.penalty_last_n));
  }
  if (std::isnan(params.min_p) || params.min_p > 1.0f) {
    throw UsageError(fmt::format("sampler: min_p must be <= 1 (got {})", params.min_p));
  }
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(params_.seed);
}

void Sampler::accept(int32_t id) {
  if (params_.penalty_last_n == 0) return;
  history_.push_back(id);
  if (params_.penalty_last_n > 0 && history_.size() > static_cast<size_t>(params_.penalty_last_n)) {
    history_.pop_front();
  }
}

void Sampler::apply_penalties(std::vector<Candidate>& cands) const {
  const bool active = params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                      params_.presence_penalty != 0.0f;
  if (!active || history_.empty()) return;
  std::unordered_map<int32_t, int> counts;
  for (int32_t id : history_) ++counts[id];
  for (const auto& [id, count] : counts) {
    if (id < 0 || static_cast<size_t>(id) >= cands.size()) continue;
    float& l = cands[id].logit;  // cands are still in id order here
    l = l <= 0.0f ? l * params_.repeat_penalty : l / params_.repeat_penalty;
    l -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

size_t Sampler::prepare(std::span<const float> logits) {
  if (logits.empty()) throw UsageError("sampler: empty logits");
  cands_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cands_[i] = {static_cast<int32_t>(i), logits[i]};
  for (const auto& [id, bias] : params_.logit_bias) {
    if (id >= 0 && static_cast<size_t>(id) < cands_.size()) cands_[id].logit += bias;
  }
  apply_penalties(cands_);
  if (params_.temperature <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < cands_.size(); ++i)
      if (cands_[i].logit > cands_[best].logit) best = i;
    cands_[0] = cands_[best];
    probs_.assign(1, 1.0);
    return 1;
  }
  auto before = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t n = cands_.size();
  // top-k: only the k best need ordering.
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n = static_cast<size_t>(params_.top_k);
    std::partial_sort(cands_.begin(), cands_.begin() + n, cands_.end(), before);
  } else {
    std::sort(cands_.begin(), cands_.end(), before);
  }
  // Softmax over the survivors (sorted, so the first is the max).
  probs_.resize(n);  // (n) f64
  auto softmax = [&](size_t count, float temp) {
    const double max_l = cands_[0].logit / temp;
    double sum = 0;
    for (size_t i = 0; i < count; ++i) {
      probs_[i] = std::exp(cands_[i].logit / temp - max_l);
      sum += probs_[i];
    }
    for (size_t i = 0; i < count; ++i) probs_[i] /= sum;
  };
  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  if (params_.top_p < 1.0f) {
    softmax(n, 1.0f);
    double cum = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cum += probs_[i];
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  // min-p: drop tokens below min_p times the best probability (in logit space).
  if (params_.min_p > 0.0f) {
    const float threshold = cands_[0].logit + std::log(params_.min_p);
    size_t keep = 1;
    while (keep < n && cands_[keep].logit >= threshold) ++keep;
    n = keep;
  }
  softmax(n, params_.temperature);
  probs_.resize(n);
  return n;
}

double Sampler::uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits) {
  const size_t n = prepare(logits);
  if (params_.temperature <= 0.0f) return cands_[0].id;
  const double u = uniform();
  double cum = 0;
  for (size_t i = 0; i < n; ++i) {
    cum += probs_[i];
    if (u < cum) return cands_[i].id;
  }
  return cands_[n - 1].id;  // rounding left u above the last cumulative value
}

std::vector<std::pair<int32_t, double>> Sampler::distribution(std::span<const float> logits) {
  const size_t n = prepare(logits);
  std::vector<std::pair<int32_t, double>> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = {cands_[i].id, probs_[i]};
  return out;
}

Sampler::Verdict Sampler::verify(std::span<const float> logits, int32_t draft) {
  const size_t n = prepare(logits);
  if (params_.temperature <= 0.0f) return {cands_[0].id, cands_[0].id == draft};
  size_t at = n;  // the draft's candidate, n when the chain left it out (p = 0)
  for (size_t i = 0; i < n; ++i) {
    if (cands_[i].id == draft) {
      at = i;
      break;
    }
  }
  const double p = at < n ? probs_[at] : 0.0;
  // A drafted token is a draw from a one-hot q: accept it with probability min(1, p/q) = p.
  if (uniform() < p) return {draft, true};
  // Otherwise draw from max(0, p - q), normalised: p without the draft.
  const double u = uniform() * (1.0 - p);
  double cum = 0;
  size_t last = n;
  for (size_t i = 0; i < n; ++i) {
    if (i == at) continue;
    last = i;
    cum += probs_[i];
    if (u < cum) return {cands_[i].id, false};
  }
  // Rounding left u above the last cumulative value; n = 1 with the draft there has p = 1
  // and never gets here.
  return {cands_[last < n ? last : 0].id, false};
}

}  // namespace hearth::text
