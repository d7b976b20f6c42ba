// The token loop shared by `hearth run`, `hearth chat`, the demo and the ring head:
// prefill the prompt, then sample, stream text and feed back one token at a time, or with a
// drafter (head/drafter.h) the chosen token and the drafts after it, verified in one trip.
// Where logits come from is abstract (head/logits_source.h): one local engine, or a ring of
// devices.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "hearth/head/logits_source.h"
#include "hearth/text/grammar.h"
#include "hearth/text/sampler.h"
#include "hearth/text/tokenizer.h"

namespace hearth::head {

class Drafter;

struct GenerateParams {
  int32_t n_predict = 128;  // tokens to generate at most; < 0: until end of generation/context
  text::SamplerParams sampling;
  bool stop_at_eog = true;                       // stop on EOS/EOT tokens
  int64_t seq = 0;                               // sequence id (chat keeps one across turns)
  std::shared_ptr<const text::Grammar> grammar;  // non-null: the text must be a sentence of it
  // Speculative decoding: non-null, each trip evaluates the token just chosen and up to
  // draft_max tokens the drafter proposes after it, in one batch, and keeps the drafts the
  // target model accepts (greedy: those equal to its argmax; sampling: the acceptance rule of
  // text::Sampler::verify, so the output follows the target's distribution).
  Drafter* drafter = nullptr;
  // Drafts per trip at most. The length asked for adapts within it: two more after a trip
  // whose drafts all passed, one more than were kept after one that rejected any
  // (next_draft_length).
  int32_t draft_max = 16;
  int32_t draft_min = 0;  // fewer drafts than this are not verified (a plain step instead)
  // Tokens the sequence already holds before `prompt` (a chat's earlier turns): the drafter
  // sees them with the prompt and the generated tokens.
  std::span<const int32_t> past;
};

struct GenerateResult {
  std::vector<int32_t> ids;  // generated token ids
  std::string text;          // their detokenized text
  int64_t prompt_tokens = 0;
  double ttft_ms = 0;        // prompt start -> first token sampled
  double tpot_ms = 0;        // mean time per output token after the first
  double prefill_tok_s = 0;  // prompt tokens / prefill time
  std::string stop_reason;   // "length", "eog", "context", "grammar" (the sentence is whole)
  // Trips after the prompt (evaluations of the source), tokens drafted and drafts accepted.
  // Without a drafter trips = generated tokens - 1 and the others are 0.
  int64_t trips = 0, drafted = 0, accepted = 0;
  double draft_ms = 0;  // time in the drafter after the first token (the rest is the trips')
};

// The drafts to ask for after a trip that asked for `asked` (> 0) and kept `accepted`.
int64_t next_draft_length(int64_t asked, int64_t accepted, int64_t draft_max);

// Generated tokens per trip around the source after the first token (which the prompt's
// trip gives): 1 without drafts, up to draft_max + 1 with.
double tokens_per_trip(const GenerateResult& r);

// Runs the loop; `on_text` receives each piece of valid UTF-8 as soon as it is complete.
GenerateResult generate(LogitsSource& source, const text::Tokenizer& tokenizer,
                        std::span<const int32_t> prompt, const GenerateParams& params,
                        const std::function<void(std::string_view)>& on_text = {});

}  // namespace hearth::head
