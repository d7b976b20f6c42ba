// Several sequences' chunks evaluated in one forward pass (continuous batching).
//
// A batch is a list of segments; segment i owns the next n_tokens rows of the stacked hidden
// state (n_total, dim), in list order:
//
//   rows [0, a.n_tokens)                    sequence a at positions a.pos0 ..
//   rows [a.n_tokens, a.n + b.n_tokens)     sequence b at positions b.pos0 ..
//
// The engine runs every projection and the feed-forward as one matmul over all rows (the
// weights are read once per step, whatever the number of sequences), rotates each row at its
// own position, appends each segment's K/V to its own sequence's cache and runs attention per
// segment against that cache. Every kernel computes a row independently of the others, so a
// sequence's result is bitwise the same alone or batched with any others.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace hearth::model {

struct BatchSegment {
  int64_t seq = 0;       // sequence (KV cache) id; at most once per batch
  int64_t pos0 = 0;      // position of the segment's first row; the cache must hold exactly pos0
  int64_t n_tokens = 0;  // rows, >= 1
};

// One sequence's part of a whole-model evaluation (Engine::eval_batch).
struct EvalItem {
  int64_t seq = 0;
  std::span<const int32_t> tokens;  // appended at the sequence's current length; non-empty
  float* logits = nullptr;          // (vocab) f32 of the last token, or null for none
  // True: `logits` is (tokens.size(), vocab), every token's logits (speculative decoding
  // verifies each drafted token against the logits before it).
  bool all_logits = false;
};

// Total rows of a batch. Throws UsageError for an empty batch, a segment without rows, a
// negative position or a sequence listed twice (naming it).
int64_t batch_rows(std::span<const BatchSegment> segments);

// "seq 3 (pos 10, 1 tok), seq 5 (pos 0, 12 tok)" for error messages and logs.
std::string describe(std::span<const BatchSegment> segments);

}  // namespace hearth::model
