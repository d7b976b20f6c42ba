// Binds a GGUF file's tensors to the weights of a llama/qwen2/qwen3 transformer: views into the
// mmap, no copies. Every shape is checked against the hyperparameters before use.
#pragma once

#include <vector>

#include "hearth/compute/matmul.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"

namespace hearth::model {

using compute::WeightView;

struct LayerWeights {
  const float* attn_norm = nullptr;       // (dim) f32
  WeightView wq{}, wk{}, wv{}, wo{};      // (q_dim, dim) (kv_dim, dim) (kv_dim, dim) (dim, q_dim)
  const float* bq = nullptr;              // (q_dim) f32, qwen2 only
  const float* bk = nullptr;              // (kv_dim) f32
  const float* bv = nullptr;              // (kv_dim) f32
  const float* q_norm = nullptr;          // (head_dim) f32, qwen3 only: per-head RMS norm of q
  const float* k_norm = nullptr;          // (head_dim) f32, of k
  const float* ffn_norm = nullptr;        // (dim) f32
  WeightView w_gate{}, w_up{}, w_down{};  // (ffn, dim) (ffn, dim) (dim, ffn)
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
