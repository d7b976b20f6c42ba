// The token loop shared by `hearth run`, `hearth chat`, the demo and the ring head:
// prefill the prompt, then sample, stream text and feed back one token at a time.
// Where logits come from is abstract (LogitsSource): one local engine, or a ring of devices.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "hearth/text/grammar.h"
#include "hearth/text/sampler.h"
#include "hearth/text/tokenizer.h"

namespace hearth::model {

class Engine;

class LogitsSource {
 public:
  virtual ~LogitsSource() = default;
  // Appends `tokens` to sequence `seq` and writes the logits of the last one (vocab).
  virtual void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) = 0;
  virtual int64_t vocab() const = 0;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t seq_length(int64_t seq) const = 0;
};

// A single device running every layer.
class LocalSource : public LogitsSource {
 public:
  explicit LocalSource(Engine& engine) : engine_(engine) {}
  void eval(int64_t seq, std::span<const int32_t> tokens, float* logits) override;
  int64_t vocab() const override;
  int64_t n_ctx() const override;
  int64_t seq_length(int64_t seq) const override;

 private:
  Engine& engine_;
};

struct GenerateParams {
  int32_t n_predict = 128;  // tokens to generate at most; < 0: until end of generation/context
  text::SamplerParams sampling;
  bool stop_at_eog = true;                       // stop on EOS/EOT tokens
  int64_t seq = 0;                               // sequence id (chat keeps one across turns)
  std::shared_ptr<const text::Grammar> grammar;  // non-null: the text must be a sentence of it
};

struct GenerateResult {
  std::vector<int32_t> ids;  // generated token ids
  std::string text;          // their detokenized text
  int64_t prompt_tokens = 0;
  double ttft_ms = 0;        // prompt start -> first token sampled
  double tpot_ms = 0;        // mean time per output token after the first
  double prefill_tok_s = 0;  // prompt tokens / prefill time
  std::string stop_reason;   // "length", "eog", "context", "grammar" (the sentence is whole)
};

// Runs the loop; `on_text` receives each piece of valid UTF-8 as soon as it is complete.
GenerateResult generate(LogitsSource& source, const text::Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateParams& params,
                        const std::function<void(std::string_view)>& on_text = {});

}  // namespace hearth::model
