// What the planner knows about a model: per-layer FLOPs and bytes per weight type, input and
// output layer bytes, KV bytes per token (paper A.3: F_m, F_out, b, b_i, b_o, 2(h_k e_k +
// h_v e_v)): the plain structs. profiler/model_profiler.h computes them from hyperparameters
// plus the type of every weight tensor, for a named preset with a quantization scheme as well
// as for the tensor list of a GGUF.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hearth/gguf/tensor_type.h"

namespace hearth::profile {

// The weight type of every tensor role of one transformer layer.
struct LayerTypes {
  gguf::TensorType attn_q, attn_k, attn_v, attn_output;
  gguf::TensorType ffn_gate, ffn_up, ffn_down;
};

struct WeightTypes {
  std::vector<LayerTypes> layers;  // (n_layers)
  gguf::TensorType token_embd;
  gguf::TensorType output;  // ignored when embeddings are tied
};

struct LayerProfile {
  std::map<gguf::TensorType, double> flops;    // FLOPs per token by weight type of the matvec
  std::map<gguf::TensorType, uint64_t> bytes;  // weight bytes by type
  uint64_t total_bytes = 0;                    // b for this layer
  uint64_t expert_bytes = 0;                   // of which a mixture's experts
};

struct ModelProfile {
  std::string name;
  uint32_t n_layers = 0;             // L
  uint32_t dim = 0;                  // e
  uint32_t vocab = 0;                // V
  std::vector<LayerProfile> layers;  // (n_layers)
  LayerProfile mean_layer;           // the per-layer average the cost model uses (b, F)
  double layer_bytes = 0;            // b: mean weight bytes of one layer
  // A mixture of experts: the mean bytes of one layer's experts (part of b), and the share of
  // them a token reads (experts used / count, uniform popularity). 0 and 1 for a dense model.
  double expert_bytes = 0;
  double expert_share = 1;
  uint64_t input_bytes = 0;          // b_i: token embedding table
  uint64_t output_bytes = 0;         // b_o: output norm + output matrix (the embedding if tied)
  std::map<gguf::TensorType, double> output_flops;  // F_out per token
  // Attention score and value mixing per layer per cached token, computed on the f16 KV
  // cache: 4 * n_heads * head_dim FLOPs (Q.K and P.V).
  double attn_flops_per_kv_token = 0;
  uint64_t kv_bytes_per_token = 0;  // per layer, K and V (f16: 2 * 2 * n_kv_heads * head_dim)
  uint32_t n_kv_heads = 0, head_dim = 0;
  uint64_t hidden_bytes = 0;        // one f32 hidden state on the wire: 4 * dim
  // Working buffers that are not weights and cannot be reclaimed (c^cpu, c^gpu): the
  // activations of a 512-token prompt batch through one layer, 4 * 512 * (4 dim + 2 ffn).
  uint64_t compute_buffer_cpu = 0;
  // What a streaming device (cluster::Stage) keeps free besides its weights and KV cache:
  // working buffers for decode and short prompts (profiler::stage_working_bytes). The
  // overlap cost model uses it in place of compute_buffer_cpu, so the plan's weight budgets
  // are the ones the devices compute; 0 (hand-built profiles): compute_buffer_cpu.
  uint64_t stage_buffer_cpu = 0;
  uint64_t compute_buffer_gpu = 0;
  // The largest group of weights one layer reads at once, over all layers: attn_q + attn_k +
  // attn_v, attn_output, ffn_gate + ffn_up, or ffn_down (each with its bias). A device that
  // streams weights needs a buffer of at least two of these (one in use, one being read).
  uint64_t stream_unit_bytes = 0;

  double total_weight_bytes() const { return layer_bytes * n_layers + input_bytes + output_bytes; }
  // Bytes of one layer a token reads: the dense part and its share of the experts.
  double layer_read_bytes() const { return layer_bytes - expert_bytes * (1.0 - expert_share); }
};

}  // namespace hearth::profile
