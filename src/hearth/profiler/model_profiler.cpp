#include "hearth/profiler/model_profiler.h"

#include <algorithm>
#include <array>
#include <string>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/presets.h"

namespace hearth::profiler {

using profile::LayerProfile;
using profile::LayerTypes;
using profile::ModelProfile;
using profile::WeightTypes;

namespace {

using gguf::TensorType;

// Falls back when `type` cannot store rows of `cols` elements (block size does not divide).
TensorType storable(TensorType type, uint64_t cols) {
  for (TensorType t : {type, TensorType::kQ8_0, TensorType::kF16}) {
    if (gguf::row_bytes(t, cols)) return t;
  }
  return TensorType::kF32;
}

uint64_t matrix_bytes(TensorType type, uint64_t rows, uint64_t cols) {
  return rows * *gguf::row_bytes(type, cols);
}

struct Matrix {
  TensorType type;
  uint64_t rows;  // output features
  uint64_t cols;  // input features (the contiguous dimension)
};

// `share`: the fraction of the matrix a token multiplies (a mixture's experts: used / count).
void add_matrix(LayerProfile& lp, const Matrix& m, double share = 1.0) {
  lp.flops[m.type] += share * 2.0 * static_cast<double>(m.rows) * static_cast<double>(m.cols);
  const uint64_t b = matrix_bytes(m.type, m.rows, m.cols);
  lp.bytes[m.type] += b;
  lp.total_bytes += b;
}

// Elementwise work of one layer (two RMS norms, RoPE, SiLU-gate, residual adds, qwen3's
// per-head q/k norms), f32.
double elementwise_flops(const model::HParams& hp) {
  return 2.0 * 4.0 * hp.dim + 3.0 * (hp.q_dim() + hp.kv_dim()) + 4.0 * hp.ffn_row() + 2.0 * hp.dim +
         (hp.qk_norm ? 4.0 * (hp.q_dim() + hp.kv_dim()) : 0.0);
}

}  // namespace

uint64_t stage_working_bytes(const model::HParams& hp) {
  // A mixture's row also holds its router logits and its k experts' outputs.
  const uint64_t moe = hp.is_moe() ? hp.n_experts + (hp.n_experts_used + 1ull) * hp.dim : 0;
  return 4ull * kStageRows * (5ull * hp.dim + 2ull * hp.ffn_row() + hp.q_dim() + moe);
}

namespace {}  // namespace

void set_kv_types(ModelProfile& p, compute::KvTypes types) {
  p.kv_bytes_per_token =
      types.bytes_per_token(static_cast<int>(p.n_kv_heads), static_cast<int>(p.head_dim));
}

namespace {

void fill_common(ModelProfile& p, const model::HParams& hp) {
  p.n_layers = hp.n_layers;
  p.dim = hp.dim;
  p.vocab = hp.vocab;
  p.attn_flops_per_kv_token = 4.0 * hp.n_heads * hp.head_dim;
  p.n_kv_heads = hp.n_kv_heads;
  p.head_dim = hp.head_dim;
  set_kv_types(p, {});
  p.hidden_bytes = 4ull * hp.dim;
  p.compute_buffer_cpu = 4ull * 512ull * (4ull * hp.dim + 2ull * hp.ffn_row());
  p.compute_buffer_gpu = p.compute_buffer_cpu;
  p.stage_buffer_cpu = stage_working_bytes(hp);
  // The average layer: the cost model treats layers as interchangeable (paper A.3 uses one b).
  LayerProfile mean;
  double bytes = 0;
  for (const auto& l : p.layers) {
    for (const auto& [t, f] : l.flops) mean.flops[t] += f / p.layers.size();
    for (const auto& [t, b] : l.bytes) mean.bytes[t] += b / p.layers.size();
    bytes += static_cast<double>(l.total_bytes);
  }
  mean.total_bytes = static_cast<uint64_t>(bytes / static_cast<double>(p.layers.size()));
  p.mean_layer = std::move(mean);
  p.layer_bytes = bytes / static_cast<double>(p.layers.size());
  double experts = 0;
  for (const auto& l : p.layers) experts += static_cast<double>(l.expert_bytes);
  p.expert_bytes = experts / static_cast<double>(p.layers.size());
  p.expert_share = hp.is_moe() ? double(hp.n_experts_used) / hp.n_experts : 1.0;
}

void check_hparams(const model::HParams& hp) {
  if (hp.n_layers == 0 || hp.dim == 0 || hp.n_heads == 0 || hp.n_kv_heads == 0 ||
      hp.head_dim == 0 || hp.ffn == 0 || hp.vocab == 0) {
    throw UsageError(
        "model hyperparameters have a zero dimension (layers, dim, heads, ffn, vocab)");
  }
}

}  // namespace

std::vector<std::string_view> known_schemes() {
  return {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"};
}

WeightTypes weight_types_for_scheme(const model::HParams& hp, std::string_view scheme) {
  check_hparams(hp);
  bool known = false;
  for (auto s : known_schemes()) known |= s == scheme;
  if (!known) {
    std::string list;
    for (auto s : known_schemes()) list += (list.empty() ? "" : ", ") + std::string(s);
    throw UsageError("unknown quantization scheme '" + std::string(scheme) + "' (known: " + list +
                     ")");
  }
  const bool mixed = scheme == "q4_k_m" || scheme == "q5_k_m";
  const std::string base_name = mixed ? std::string(scheme.substr(0, 4)) : std::string(scheme);
  const TensorType base = *gguf::tensor_type_from_name(base_name);
  const bool k_type = base_name.back() == 'k';
  WeightTypes wt;
  const uint32_t L = hp.n_layers;
  for (uint32_t i = 0; i < L; ++i) {
    // llama.cpp's "more bits" rule for *_M mixes: the first and last eighth of the layers
    // and every third layer between them keep attn_v and ffn_down at 6 bits.
    const bool more_bits = i < L / 8 || i >= 7 * L / 8 || (i - L / 8) % 3 == 2;
    const TensorType hi = mixed && more_bits ? TensorType::kQ6_K : base;
    // And for 8-expert models (Mixtral) in q4_k_m: attention k, v at q8_0, output at q5_k.
    const bool eight = hp.n_experts == 8 && scheme == "q4_k_m";
    LayerTypes lt;
    lt.attn_q = storable(base, hp.dim);
    lt.attn_k = storable(eight ? TensorType::kQ8_0 : base, hp.dim);
    lt.attn_v = storable(eight ? TensorType::kQ8_0 : hi, hp.dim);
    lt.attn_output = storable(eight ? TensorType::kQ5_K : base, hp.q_dim());
    lt.ffn_gate = storable(base, hp.dim);
    lt.ffn_up = storable(base, hp.dim);
    lt.ffn_down = storable(hi, hp.is_moe() ? hp.ffn_expert : hp.ffn);
    wt.layers.push_back(lt);
  }
  wt.token_embd = storable(base, hp.dim);
  wt.output = storable(k_type ? TensorType::kQ6_K : base, hp.dim);
  return wt;
}

ModelProfile profile_model(const model::HParams& hp, const WeightTypes& types, std::string name) {
  check_hparams(hp);
  if (types.layers.size() != hp.n_layers) {
    throw UsageError("weight types list " + std::to_string(types.layers.size()) +
                     " layers, model has " + std::to_string(hp.n_layers));
  }
  ModelProfile p;
  p.name = std::move(name);
  for (const auto& lt : types.layers) {
    LayerProfile lp;
    add_matrix(lp, {lt.attn_q, hp.q_dim(), hp.dim});
    add_matrix(lp, {lt.attn_k, hp.kv_dim(), hp.dim});
    add_matrix(lp, {lt.attn_v, hp.kv_dim(), hp.dim});
    add_matrix(lp, {lt.attn_output, hp.dim, hp.q_dim()});
    // A mixture holds every expert and multiplies the k its router picks, plus the router.
    const uint64_t ffn = hp.is_moe() ? hp.ffn_expert : hp.ffn;
    const uint64_t copies = hp.is_moe() ? hp.n_experts : 1;
    const double share = hp.is_moe() ? double(hp.n_experts_used) / hp.n_experts : 1.0;
    if (hp.is_moe()) add_matrix(lp, {TensorType::kF32, hp.n_experts, hp.dim});
    add_matrix(lp, {lt.ffn_gate, copies * ffn, hp.dim}, share);
    add_matrix(lp, {lt.ffn_up, copies * ffn, hp.dim}, share);
    add_matrix(lp, {lt.ffn_down, copies * hp.dim, ffn}, share);
    if (hp.is_moe()) {
      lp.expert_bytes = matrix_bytes(lt.ffn_gate, copies * ffn, hp.dim) +
                        matrix_bytes(lt.ffn_up, copies * ffn, hp.dim) +
                        matrix_bytes(lt.ffn_down, copies * hp.dim, ffn);
    }
    const uint64_t bias = hp.qkv_bias ? 4ull * (hp.q_dim() + 2ull * hp.kv_dim()) : 0;
    const uint64_t units[] = {
        matrix_bytes(lt.attn_q, hp.q_dim(), hp.dim) + matrix_bytes(lt.attn_k, hp.kv_dim(), hp.dim) +
            matrix_bytes(lt.attn_v, hp.kv_dim(), hp.dim) + bias,
        matrix_bytes(lt.attn_output, hp.dim, hp.q_dim()),
        hp.is_moe() ? 0
                    : matrix_bytes(lt.ffn_gate, ffn, hp.dim) + matrix_bytes(lt.ffn_up, ffn, hp.dim),
        hp.is_moe() ? 0 : matrix_bytes(lt.ffn_down, hp.dim, ffn)};
    for (uint64_t u : units) p.stream_unit_bytes = std::max(p.stream_unit_bytes, u);
    // Norm weights (and qwen2's q/k/v biases, qwen3's per-head q/k norms) are f32 vectors.
    const uint64_t vec = 2ull * hp.dim + (hp.qkv_bias ? hp.q_dim() + 2ull * hp.kv_dim() : 0) +
                         (hp.qk_norm ? 2ull * hp.head_dim : 0);
    lp.bytes[TensorType::kF32] += 4 * vec;
    lp.total_bytes += 4 * vec;
    lp.flops[TensorType::kF32] += elementwise_flops(hp);
    p.layers.push_back(std::move(lp));
  }
  p.input_bytes = matrix_bytes(types.token_embd, hp.vocab, hp.dim);
  const TensorType out_type = hp.tied_embeddings ? types.token_embd : types.output;
  p.output_bytes = matrix_bytes(out_type, hp.vocab, hp.dim) + 4ull * hp.dim;
  p.output_flops[out_type] = 2.0 * hp.vocab * hp.dim;
  p.output_flops[TensorType::kF32] = 4.0 * hp.dim + 3.0 * hp.vocab;  // norm + softmax
  fill_common(p, hp);
  return p;
}

ModelProfile profile_model(const model::HParams& hp, const std::vector<gguf::TensorInfo>& tensors,
                           std::string name) {
  check_hparams(hp);
  ModelProfile p;
  p.name = std::move(name);
  p.layers.resize(hp.n_layers);
  std::vector<int> matrices(hp.n_layers, 0);
  // Bytes of each stream unit per layer: 0 attention q/k/v, 1 attention output, 2 gate/up,
  // 3 down (weights and biases of the role).
  std::vector<std::array<uint64_t, 4>> units(hp.n_layers, std::array<uint64_t, 4>{});
  const gguf::TensorInfo* embd = nullptr;
  const gguf::TensorInfo* output = nullptr;
  for (const auto& t : tensors) {
    // Product of the shape, computed here so the profile does not depend on the reader's code.
    double elems = 1;
    for (uint64_t d : t.shape) elems *= static_cast<double>(d);
    if (t.name.rfind("blk.", 0) == 0) {
      const auto dot = t.name.find('.', 4);
      uint32_t layer = 0;
      try {
        layer = static_cast<uint32_t>(std::stoul(t.name.substr(4, dot - 4)));
      } catch (const std::exception&) {
        throw FormatError(p.name + ": tensor '" + t.name + "' has no layer number");
      }
      if (layer >= hp.n_layers) {
        throw FormatError(p.name + ": tensor '" + t.name + "' is beyond block_count " +
                          std::to_string(hp.n_layers));
      }
      const std::string role = t.name.substr(dot + 1, t.name.find('.', dot + 1) - dot - 1);
      const int unit = role == "attn_q" || role == "attn_k" || role == "attn_v" ? 0
                       : role == "attn_output"                                  ? 1
                       : role == "ffn_gate" || role == "ffn_up"                 ? 2
                       : role == "ffn_down"                                     ? 3
                                                                                : -1;
      // Experts (merged ffn_*_exps, or split ffn_*.E): a token multiplies used / count of them,
      // and a stage reads them where the router sends it, never in stream units.
      const bool expert = role.size() > 5 && role.compare(role.size() - 5, 5, "_exps") == 0;
      const bool split_expert =
          hp.is_moe() && (role == "ffn_gate" || role == "ffn_up" || role == "ffn_down");
      if (unit >= 0 && !split_expert) units[layer][static_cast<size_t>(unit)] += t.bytes;
      auto& lp = p.layers[layer];
      lp.bytes[t.type] += t.bytes;
      lp.total_bytes += t.bytes;
      if (expert || split_expert) lp.expert_bytes += t.bytes;
      const double share = expert || split_expert ? double(hp.n_experts_used) / hp.n_experts : 1.0;
      if (t.shape.size() >= 2) {
        lp.flops[t.type] += share * 2.0 * elems;
        ++matrices[layer];
      }
    } else if (t.name == "token_embd.weight") {
      embd = &t;
    } else if (t.name == "output.weight") {
      output = &t;
    } else if (t.name == "output_norm.weight") {
      p.output_bytes += t.bytes;
    }
  }
  for (const auto& u : units) {
    for (uint64_t b : u) p.stream_unit_bytes = std::max(p.stream_unit_bytes, b);
  }
  for (uint32_t i = 0; i < hp.n_layers; ++i) {
    if (matrices[i] < 7) {
      throw FormatError(p.name + ": layer " + std::to_string(i) + " has " +
                        std::to_string(matrices[i]) +
                        " weight matrices, expected 7 (q, k, v, o, gate, up, down)");
    }
    p.layers[i].flops[TensorType::kF32] += elementwise_flops(hp);
  }
  if (!embd) throw FormatError(p.name + ": tensor 'token_embd.weight' is missing");
  p.input_bytes = embd->bytes;
  const gguf::TensorInfo* out = output ? output : embd;  // tied embeddings reuse the table
  p.output_bytes += out->bytes;
  double out_elems = 1;
  for (uint64_t d : out->shape) out_elems *= static_cast<double>(d);
  p.output_flops[out->type] = 2.0 * out_elems;
  p.output_flops[TensorType::kF32] = 4.0 * hp.dim + 3.0 * hp.vocab;
  fill_common(p, hp);
  return p;
}

ModelProfile profile_model_file(const std::string& path) {
  const auto file = gguf::GgufFile::open(path);
  const auto hp = model::load_hparams(file);
  return profile_model(hp, file.tensors(), path);
}

ModelProfile profile_preset(std::string_view preset, double scale, std::string_view scheme) {
  const auto& pr = model::find_preset(preset);
  const auto hp = model::scale_hparams(pr.hparams, scale);
  std::string name = std::string(pr.name) + " " + std::string(scheme);
  if (scale != 1.0) name += " x" + std::to_string(scale).substr(0, 5);
  return profile_model(hp, weight_types_for_scheme(hp, scheme), name);
}

}  // namespace hearth::profiler
