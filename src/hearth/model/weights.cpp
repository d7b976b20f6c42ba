#include "hearth/model/weights.h"

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/quant/type_traits.h"

namespace hearth::model {

namespace {

struct Binder {
  const gguf::GgufFile& f;

  const gguf::TensorInfo& get(const std::string& name, std::vector<uint64_t> shape) const {
    const auto& t = f.tensor(name);
    if (t.shape != shape) {
      auto str = [](const std::vector<uint64_t>& s) {
        std::string out;
        for (size_t i = 0; i < s.size(); ++i) out += (i ? " x " : "") + std::to_string(s[i]);
        return out;
      };
      throw FormatError(fmt::format("{}: tensor '{}' has shape [{}], expected [{}]", f.path(), name,
                                    str(t.shape), str(shape)));
    }
    return t;
  }

  WeightView matrix(const std::string& name, uint64_t cols, uint64_t rows,
                    std::vector<std::pair<const uint8_t*, uint64_t>>* spans = nullptr) const {
    return typed(get(name, {cols, rows}), name, rows, cols, spans);
  }

  // A (cols, rows, depth) tensor as one (depth * rows, cols) matrix.
  WeightView matrix3(const std::string& name, uint64_t cols, uint64_t rows, uint64_t depth,
                     std::vector<std::pair<const uint8_t*, uint64_t>>* spans = nullptr) const {
    return typed(get(name, {cols, rows, depth}), name, rows * depth, cols, spans);
  }

  WeightView typed(const gguf::TensorInfo& t, const std::string& name, uint64_t rows, uint64_t cols,
                   std::vector<std::pair<const uint8_t*, uint64_t>>* spans) const {
    if (!quant::is_supported(t.type) || quant::traits(t.type).vec_dot == nullptr) {
      throw FormatError(
          fmt::format("{}: tensor '{}' has type {}, which hearth cannot compute with yet", f.path(),
                      name, gguf::tensor_type_name(t.type)));
    }
    if (spans) spans->emplace_back(t.data, t.bytes);
    return WeightView{t.type, static_cast<int64_t>(rows), static_cast<int64_t>(cols), t.data};
  }

  const float* vec(const std::string& name, uint64_t n,
                   std::vector<std::pair<const uint8_t*, uint64_t>>* spans = nullptr) const {
    const auto& t = get(name, {n});
    if (t.type != gguf::TensorType::kF32) {
      throw FormatError(fmt::format("{}: tensor '{}' must be f32, is {}", f.path(), name,
                                    gguf::tensor_type_name(t.type)));
    }
    if (spans) spans->emplace_back(t.data, t.bytes);
    // GGUF data offsets are aligned to >= 32 bytes, so f32 access is aligned.
    return reinterpret_cast<const float*>(t.data);
  }
};

// Expert e of a merged (cols, rows, n_experts) tensor is its rows [e * rows, (e + 1) * rows)
// seen as one (n_experts * rows, cols) matrix.
WeightView expert_slice(const WeightView& all, uint32_t n_experts, uint32_t e) {
  const int64_t rows = all.rows / n_experts;
  const uint64_t row_bytes = *gguf::row_bytes(all.type, static_cast<uint64_t>(all.cols));
  WeightView v = all;
  v.rows = rows;
  v.data = static_cast<const uint8_t*>(all.data) + static_cast<uint64_t>(e) * rows * row_bytes;
  return v;
}

void bind_experts(const Binder& b, const HParams& hp, const std::string& p, LayerWeights& L) {
  auto* s = &L.spans;
  const uint32_t n = hp.n_experts, ffn = hp.ffn_expert;
  L.router = b.matrix(p + "ffn_gate_inp.weight", hp.dim, n, s);
  L.experts.resize(n);
  if (hp.expert_layout == ExpertLayout::kSplit) {
    for (uint32_t e = 0; e < n; ++e) {
      ExpertWeights& E = L.experts[e];
      E.gate = b.matrix(fmt::format("{}ffn_gate.{}.weight", p, e), hp.dim, ffn, s);
      E.up = b.matrix(fmt::format("{}ffn_up.{}.weight", p, e), hp.dim, ffn, s);
      E.down = b.matrix(fmt::format("{}ffn_down.{}.weight", p, e), ffn, hp.dim, s);
    }
    return;
  }
  const WeightView gate = b.matrix3(p + "ffn_gate_exps.weight", hp.dim, ffn, n, s);
  const WeightView up = b.matrix3(p + "ffn_up_exps.weight", hp.dim, ffn, n, s);
  const WeightView down = b.matrix3(p + "ffn_down_exps.weight", ffn, hp.dim, n, s);
  for (uint32_t e = 0; e < n; ++e) {
    L.experts[e] = {expert_slice(gate, n, e), expert_slice(up, n, e), expert_slice(down, n, e)};
  }
}

}  // namespace

ModelWeights bind_weights(const gguf::GgufFile& file, const HParams& hp) {
  Binder b{file};
  ModelWeights m;
  m.hp = hp;
  {
    const auto& t = b.get("token_embd.weight", {hp.dim, hp.vocab});
    if (!quant::is_supported(t.type)) {
      throw FormatError(fmt::format("{}: token_embd.weight type {} is not supported", file.path(),
                                    gguf::tensor_type_name(t.type)));
    }
    m.token_embd = WeightView{t.type, hp.vocab, hp.dim, t.data};
  }
  m.output_norm = b.vec("output_norm.weight", hp.dim);
  m.output = hp.tied_embeddings ? m.token_embd : b.matrix("output.weight", hp.dim, hp.vocab);
  if (hp.rope_freqs) m.rope_freqs = b.vec("rope_freqs.weight", hp.head_dim / 2);
  m.layers.resize(hp.n_layers);
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights& L = m.layers[l];
    auto* s = &L.spans;
    L.attn_norm = b.vec(p + "attn_norm.weight", hp.dim, s);
    L.wq = b.matrix(p + "attn_q.weight", hp.dim, hp.q_dim(), s);
    L.wk = b.matrix(p + "attn_k.weight", hp.dim, hp.kv_dim(), s);
    L.wv = b.matrix(p + "attn_v.weight", hp.dim, hp.kv_dim(), s);
    L.wo = b.matrix(p + "attn_output.weight", hp.q_dim(), hp.dim, s);
    if (hp.qkv_bias) {
      L.bq = b.vec(p + "attn_q.bias", hp.q_dim(), s);
      L.bk = b.vec(p + "attn_k.bias", hp.kv_dim(), s);
      L.bv = b.vec(p + "attn_v.bias", hp.kv_dim(), s);
    }
    if (hp.qk_norm) {
      L.q_norm = b.vec(p + "attn_q_norm.weight", hp.head_dim, s);
      L.k_norm = b.vec(p + "attn_k_norm.weight", hp.head_dim, s);
    }
    L.ffn_norm = b.vec(p + "ffn_norm.weight", hp.dim, s);
    if (hp.is_moe()) {
      bind_experts(b, hp, p, L);
    } else {
      L.w_gate = b.matrix(p + "ffn_gate.weight", hp.dim, hp.ffn, s);
      L.w_up = b.matrix(p + "ffn_up.weight", hp.dim, hp.ffn, s);
      L.w_down = b.matrix(p + "ffn_down.weight", hp.ffn, hp.dim, s);
    }
  }
  return m;
}

}  // namespace hearth::model
