#include "hearth/model/router.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace hearth::model {

void route_token(const float* logits, int n_experts, int k, int32_t* experts, float* weights) {
  float max = logits[0];
  for (int e = 1; e < n_experts; ++e) max = std::max(max, logits[e]);
  thread_local std::vector<float> probs;
  probs.resize(static_cast<size_t>(n_experts));
  float sum = 0.0f;
  for (int e = 0; e < n_experts; ++e) {
    probs[e] = std::exp(logits[e] - max);
    sum += probs[e];
  }
  for (int e = 0; e < n_experts; ++e) probs[e] /= sum;
  // Selection by insertion into the k best so far: k is small (2 to 8), n_experts at most a
  // few hundred. A strict comparison keeps the lower index first on ties.
  int have = 0;
  for (int e = 0; e < n_experts; ++e) {
    int at = have;
    while (at > 0 && probs[e] > probs[experts[at - 1]]) --at;
    if (at >= k) continue;
    for (int j = std::min(have, k - 1); j > at; --j) experts[j] = experts[j - 1];
    experts[at] = e;
    have = std::min(have + 1, k);
  }
  float kept = 0.0f;
  for (int j = 0; j < k; ++j) kept += probs[experts[j]];
  for (int j = 0; j < k; ++j) weights[j] = probs[experts[j]] / kept;
}

}  // namespace hearth::model
