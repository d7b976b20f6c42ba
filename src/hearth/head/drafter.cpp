#include "hearth/head/drafter.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "hearth/base/error.h"

namespace hearth::head {

LookupDrafter::LookupDrafter(int ngram_min, int ngram_max)
    : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 16) {
    throw UsageError(
        fmt::format("draft lookup: n-gram sizes must satisfy 1 <= min <= max <= 16 (got {} and {})",
                    ngram_min, ngram_max));
  }
}

std::vector<int32_t> LookupDrafter::draft(int64_t /*seq*/, std::span<const int32_t> context,
                                          int max_tokens) {
  const auto len = static_cast<int64_t>(context.size());
  for (int n = std::min<int64_t>(ngram_max_, len - 1); n >= ngram_min_; --n) {
    const std::span<const int32_t> tail = context.subspan(static_cast<size_t>(len - n));
    // The latest earlier occurrence: start positions len - n - 1 down to 0. Its continuation
    // begins at start + n, which is inside the context since start + n < len.
    for (int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(tail.begin(), tail.end(), context.begin() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_tokens, len - from);
      return {context.begin() + from, context.begin() + from + count};
    }
  }
  return {};
}

int64_t check_draft_vocab(const text::VocabData& draft, const text::VocabData& target,
                          const std::string& draft_path) {
  const auto nd = static_cast<int64_t>(draft.tokens.size());
  const auto nt = static_cast<int64_t>(target.tokens.size());
  if (draft.model != target.model) {
    throw UsageError(
        fmt::format("draft model {}: the vocabularies differ (its tokenizer is '{}', the "
                    "target's '{}')",
                    draft_path, draft.model, target.model));
  }
  if (std::llabs(nd - nt) > 256) {
    throw UsageError(fmt::format(
        "draft model {}: its vocabulary has {} tokens, the target's {} (more than 256 apart)",
        draft_path, nd, nt));
  }
  const int64_t common = std::min(nd, nt);
  for (int64_t i = 0; i < common; ++i) {
    if (draft.tokens[i] != target.tokens[i]) {
      throw UsageError(fmt::format(
          "draft model {}: token {} is '{}' there and '{}' in the target: the vocabularies "
          "differ",
          draft_path, i, draft.tokens[i], target.tokens[i]));
    }
  }
  if (draft.bos_id != target.bos_id || draft.eos_id != target.eos_id) {
    throw UsageError(fmt::format("draft model {}: BOS/EOS are {}/{} there and {}/{} in the target",
                                 draft_path, draft.bos_id, draft.eos_id, target.bos_id,
                                 target.eos_id));
  }
  return common;
}

ModelDrafter::ModelDrafter(const gguf::GgufFile& file, const std::string& draft_path,
                           const text::VocabData& target, const model::EngineOptions& options,
                           float p_min)
    : n_common_(check_draft_vocab(text::load_vocab(file), target, draft_path)),
      engine_(file, options),
      p_min_(p_min) {
  if (!(p_min >= 0.0f && p_min <= 1.0f)) {
    throw UsageError(fmt::format("--draft-p-min must be in [0, 1] (got {})", p_min));
  }
  logits_.resize(static_cast<size_t>(engine_.hparams().vocab));
}

void ModelDrafter::forget(int64_t seq) {
  engine_.drop(seq);
  cached_.erase(seq);
}

void ModelDrafter::sync(int64_t seq, std::span<const int32_t> context) {
  // Keep what the cache shares with the context; evaluate the rest (at least the last token,
  // whose logits give the first draft).
  std::vector<int32_t>& have = cached_[seq];
  size_t keep = 0;
  while (keep < have.size() && keep < context.size() && have[keep] == context[keep]) ++keep;
  if (keep == context.size()) --keep;
  engine_.truncate(seq, static_cast<int64_t>(keep));
  have.resize(keep);
  const std::span<const int32_t> fresh = context.subspan(keep);
  engine_.eval(seq, fresh, logits_.data());
  have.insert(have.end(), fresh.begin(), fresh.end());
}

void ModelDrafter::prepare(int64_t seq, std::span<const int32_t> context) {
  if (!context.empty() && static_cast<int64_t>(context.size()) <= engine_.n_ctx()) {
    sync(seq, context);
  }
}

std::vector<int32_t> ModelDrafter::draft(int64_t seq, std::span<const int32_t> context,
                                         int max_tokens) {
  std::vector<int32_t> out;
  if (context.empty() || max_tokens <= 0) return out;
  // Room for the context and the drafts fed back (all but the last).
  if (static_cast<int64_t>(context.size()) + max_tokens - 1 > engine_.n_ctx()) return out;
  sync(seq, context);
  for (int i = 0; i < max_tokens; ++i) {
    // Greedy over the ids both vocabularies share; its softmax probability for p_min.
    const std::span<const float> l(logits_.data(), static_cast<size_t>(n_common_));
    const auto best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    if (p_min_ > 0.0f) {
      double sum = 0;
      for (float x : l) sum += std::exp(static_cast<double>(x) - l[best]);
      if (1.0 / sum < p_min_) break;
    }
    out.push_back(best);
    if (i + 1 == max_tokens) break;
    engine_.eval(seq, std::span<const int32_t>(&out.back(), 1), logits_.data());
    cached_[seq].push_back(best);
  }
  return out;
}

}  // namespace hearth::head
