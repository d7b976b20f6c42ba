// Model hyperparameters: everything the engine, the planner and `hearth synth` need to know
// about a model's shape, read from GGUF keys `{arch}.*` or taken from a named preset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "hearth/gguf/tensor_type.h"

namespace hearth::gguf {
class GgufFile;
}

namespace hearth::model {

// Mixtral-style mixtures of experts are `llama` files with expert tensors; Qwen 3's are
// `qwen3moe`.
enum class Arch { kLlama, kQwen2, kQwen3, kQwen3Moe };
// "llama", "qwen2", "qwen3", "qwen3moe" (the GGUF general.architecture value).
const char* arch_name(Arch arch);
// The Qwen families rotate pairs (i, i + d/2) (GGUF's NEOX rope) and share Qwen 2's tokenizer
// rules and ChatML template.
constexpr bool is_qwen(Arch arch) {
  return arch == Arch::kQwen2 || arch == Arch::kQwen3 || arch == Arch::kQwen3Moe;
}

// How a mixture-of-experts file stores its expert matrices.
enum class ExpertLayout : uint8_t {
  kMerged,  // one 3-D tensor per kind and layer: blk.N.ffn_{gate,up,down}_exps (llama.cpp today)
  kSplit,   // each expert's own tensors: blk.N.ffn_{gate,up,down}.E (older Mixtral conversions)
};

struct HParams {
  Arch arch = Arch::kLlama;
  uint32_t n_layers = 0;
  uint32_t dim = 0;         // embedding length (n_embd)
  uint32_t n_heads = 0;     // query heads
  uint32_t n_kv_heads = 0;  // key/value heads (GQA when < n_heads)
  uint32_t head_dim = 0;    // usually dim / n_heads
  uint32_t ffn = 0;         // feed-forward length
  uint32_t vocab = 0;
  uint32_t ctx_train = 0;  // context length the model was trained with
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions multiplied by this
  bool tied_embeddings = false;  // no `output` tensor: token_embd is reused
  bool qkv_bias = false;         // qwen2: attn_q/k/v carry biases
  bool qk_norm = false;          // qwen3: each head of q and k is RMS-normalised before rope
  bool rope_freqs = false;       // Llama 3.1+: a `rope_freqs` tensor divides frequencies
  // Mixture of experts: every layer's feed-forward block is n_experts SwiGLU experts of width
  // ffn_expert, of which a router picks n_experts_used per token. 0 experts: dense (ffn).
  uint32_t n_experts = 0;
  uint32_t n_experts_used = 0;
  uint32_t ffn_expert = 0;
  ExpertLayout expert_layout = ExpertLayout::kMerged;

  uint32_t q_dim() const { return n_heads * head_dim; }
  bool is_moe() const { return n_experts > 0; }
  // Width of the feed-forward intermediate one row computes: ffn, or k experts' widths.
  uint32_t ffn_row() const { return is_moe() ? n_experts_used * ffn_expert : ffn; }
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads and validates hyperparameters from a GGUF file; FormatError names the key at fault.
HParams load_hparams(const gguf::GgufFile& file);

// The context a KV cache gets when none is asked for (-c 0): the trained context, at most 4096.
inline int64_t default_n_ctx(const HParams& hp) {
  return std::min<int64_t>(hp.ctx_train, 4096);
}

}  // namespace hearth::model
