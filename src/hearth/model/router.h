// The router of a mixture-of-experts layer: which experts a token's row goes to, and with what
// weight. Both families hearth runs (Mixtral as `llama`, and `qwen3moe`) take the softmax of the
// router's logits over every expert, keep the k most probable, and rescale those k
// probabilities to sum to 1.
#pragma once

#include <cstdint>

namespace hearth::model {

// logits: (n_experts); writes the k chosen experts, most probable first (ties to the lower
// index), to `experts` and their weights to `weights` (both k long).
void route_token(const float* logits, int n_experts, int k, int32_t* experts, float* weights);

}  // namespace hearth::model
