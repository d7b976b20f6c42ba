// Drafters for speculative decoding (generate.h): cheap guesses of the tokens that follow a
// sequence, which the target model then verifies in one batch (one trip around a ring).
//
//   LookupDrafter  the continuation of the latest earlier occurrence of the sequence's last
//                  n tokens (prompt lookup: no second model; pays off when the output repeats
//                  the context, as in edits, code and summaries).
//   ModelDrafter   a smaller model with the same vocabulary, run greedily on the head (one
//                  token at a time, each after the last, until it is unsure).
//
// A drafter proposes only; what is kept is decided by the target (Sampler::verify), so the
// output does not depend on which drafter ran, only its speed does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/text/vocab.h"

namespace hearth::head {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to `max_tokens` tokens likely to follow `context` (every token of sequence `seq` so
  // far, the last one included); fewer or none when it has no good guess.
  virtual std::vector<int32_t> draft(int64_t seq, std::span<const int32_t> context,
                                     int max_tokens) = 0;
  // The sequence ended: state kept for it may go.
  virtual void forget(int64_t /*seq*/) {}
  // The prompt is in: a drafter with a model of its own processes it now (during the
  // target's prefill), not at its first draft.
  virtual void prepare(int64_t /*seq*/, std::span<const int32_t> /*context*/) {}
  virtual const char* kind() const = 0;  // "lookup" or "model" (for --json and /metrics)
};

class LookupDrafter : public Drafter {
 public:
  // Matches suffixes of ngram_max tokens down to ngram_min (1 <= min <= max <= 16), longest
  // first; the most recent occurrence wins.
  explicit LookupDrafter(int ngram_min = 2, int ngram_max = 4);
  std::vector<int32_t> draft(int64_t seq, std::span<const int32_t> context,
                             int max_tokens) override;
  const char* kind() const override { return "lookup"; }

 private:
  int ngram_min_, ngram_max_;
};

class ModelDrafter : public Drafter {
 public:
  // `file` must outlive the drafter; `target` is the target model's vocabulary. UsageError
  // naming `draft_path` when the vocabularies differ (token texts, BOS/EOS, or sizes more
  // than 256 apart: converters pad the embedding). `p_min`: stop drafting at a token the
  // draft model gives less than this probability.
  ModelDrafter(const gguf::GgufFile& file, const std::string& draft_path,
               const text::VocabData& target, const model::EngineOptions& options, float p_min);
  std::vector<int32_t> draft(int64_t seq, std::span<const int32_t> context,
                             int max_tokens) override;
  void forget(int64_t seq) override;
  void prepare(int64_t seq, std::span<const int32_t> context) override;
  const char* kind() const override { return "model"; }
  model::Engine& engine() { return engine_; }

 private:
  int64_t n_common_;  // ids below this mean the same token in both vocabularies (checked first)
  model::Engine engine_;
  float p_min_;
  // Brings the sequence's cache to `context` (non-empty, fits): keeps the common prefix,
  // evaluates the rest; logits_ then follow the context's last token.
  void sync(int64_t seq, std::span<const int32_t> context);
  std::unordered_map<int64_t, std::vector<int32_t>> cached_;  // tokens each cache holds
  std::vector<float> logits_;                                 // (vocab) f32
};

// Checks that a draft model's vocabulary can stand in for the target's; returns the number
// of ids both share. UsageError naming `draft_path` and the first difference.
int64_t check_draft_vocab(const text::VocabData& draft, const text::VocabData& target,
                          const std::string& draft_path);

}  // namespace hearth::head
