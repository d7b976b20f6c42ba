// Binds a GGUF file's tensors to the weights of a llama/qwen2/qwen3/qwen3moe transformer: views
// into the mmap, no copies. Every shape is checked against the hyperparameters before use.
#pragma once

#include <vector>

#include "hearth/compute/matmul.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"

namespace hearth::model {

using compute::WeightView;

// One expert of a mixture-of-experts layer: a SwiGLU feed-forward block of width ffn_expert.
struct ExpertWeights {
  WeightView gate{}, up{}, down{};  // (ffn_expert, dim) (ffn_expert, dim) (dim, ffn_expert)
};

struct LayerWeights {
  const float* attn_norm = nullptr;       // (dim) f32
  WeightView wq{}, wk{}, wv{}, wo{};      // (q_dim, dim) (kv_dim, dim) (kv_dim, dim) (dim, q_dim)
  const float* bq = nullptr;              // (q_dim) f32, qwen2 only
  const float* bk = nullptr;              // (kv_dim) f32
  const float* bv = nullptr;              // (kv_dim) f32
  const float* q_norm = nullptr;          // (head_dim) f32, qwen3 only: per-head RMS norm of q
  const float* k_norm = nullptr;          // (head_dim) f32, of k
  const float* ffn_norm = nullptr;        // (dim) f32
  WeightView w_gate{}, w_up{}, w_down{};  // (ffn, dim) (ffn, dim) (dim, ffn); dense layers only
  // Mixture of experts (hp.is_moe()): the router's (n_experts, dim) matrix and the experts,
  // each a view into its layer's merged tensors or its own ones (hp.expert_layout).
  WeightView router{};
  std::vector<ExpertWeights> experts;
  // Byte ranges of this layer inside the file mapping, for residency (prefetch/release).
  std::vector<std::pair<const uint8_t*, uint64_t>> spans;
};

struct ModelWeights {
  HParams hp;
  WeightView token_embd{};             // (vocab, dim)
  const float* output_norm = nullptr;  // (dim) f32
  WeightView output{};                 // (vocab, dim); token_embd when tied
  const float* rope_freqs = nullptr;   // (head_dim/2) f32 or null
  std::vector<LayerWeights> layers;    // (n_layers)
};

// Throws FormatError naming the tensor when a tensor is missing, has the wrong shape, or has
// a type hearth cannot compute with (norms and biases must be f32).
ModelWeights bind_weights(const gguf::GgufFile& file, const HParams& hp);

}  // namespace hearth::model
