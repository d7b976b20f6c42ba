// An independent float32 reference of the llama/qwen2/qwen3 forward pass, with or without a
// mixture of experts (Mixtral's and Qwen 3's), for tests: plain loops in double-accumulated
// float, weights dequantized once, a float KV cache, no threads, no SIMD. Written from the
// architecture description, not from the engine, so the two can disagree.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"
#include "hearth/quant/type_traits.h"

namespace hearth::testing {

class ReferenceModel {
 public:
  explicit ReferenceModel(const gguf::GgufFile& f) : hp_(model::load_hparams(f)) {
    auto deq = [&](const std::string& name) {
      const auto& t = f.tensor(name);
      std::vector<float> out(t.elements());
      quant::traits_for_isa(t.type, quant::Isa::kScalar).to_float(t.data, out.data(), out.size());
      return out;
    };
    embd_ = deq("token_embd.weight");
    out_norm_ = deq("output_norm.weight");
    output_ = hp_.tied_embeddings ? embd_ : deq("output.weight");
    if (f.find_tensor("rope_freqs.weight")) rope_freqs_ = deq("rope_freqs.weight");
    for (uint32_t l = 0; l < hp_.n_layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      Layer L;
      L.attn_norm = deq(p + "attn_norm.weight");
      L.wq = deq(p + "attn_q.weight");
      L.wk = deq(p + "attn_k.weight");
      L.wv = deq(p + "attn_v.weight");
      L.wo = deq(p + "attn_output.weight");
      if (hp_.qkv_bias) {
        L.bq = deq(p + "attn_q.bias");
        L.bk = deq(p + "attn_k.bias");
        L.bv = deq(p + "attn_v.bias");
      }
      if (hp_.qk_norm) {
        L.q_norm = deq(p + "attn_q_norm.weight");
        L.k_norm = deq(p + "attn_k_norm.weight");
      }
      L.ffn_norm = deq(p + "ffn_norm.weight");
      if (!hp_.is_moe()) {
        L.wg = deq(p + "ffn_gate.weight");
        L.wu = deq(p + "ffn_up.weight");
        L.wd = deq(p + "ffn_down.weight");
      } else if (hp_.expert_layout == model::ExpertLayout::kMerged) {
        // Expert e's matrix is the e-th slice of the 3-D tensor's last dimension.
        L.wg = deq(p + "ffn_gate_exps.weight");
        L.wu = deq(p + "ffn_up_exps.weight");
        L.wd = deq(p + "ffn_down_exps.weight");
        L.router = deq(p + "ffn_gate_inp.weight");
      } else {
        for (uint32_t e = 0; e < hp_.n_experts; ++e) {
          const std::string x = "." + std::to_string(e) + ".weight";
          for (auto [dst, kind] :
               {std::pair{&L.wg, "ffn_gate"}, {&L.wu, "ffn_up"}, {&L.wd, "ffn_down"}}) {
            const auto one = deq(p + kind + x);
            dst->insert(dst->end(), one.begin(), one.end());
          }
        }
        L.router = deq(p + "ffn_gate_inp.weight");
      }
      layers_.push_back(std::move(L));
    }
    kcache_.resize(hp_.n_layers);
    vcache_.resize(hp_.n_layers);
  }

  const model::HParams& hp() const { return hp_; }

  // Feeds one token at the next position; returns the logits (vocab).
  std::vector<float> step(int token) {
    const int dim = hp_.dim, hd = hp_.head_dim, nh = hp_.n_heads, nkv = hp_.n_kv_heads;
    const int pos = n_pos_++;
    std::vector<float> x(embd_.begin() + size_t(token) * dim,
                         embd_.begin() + size_t(token + 1) * dim);
    for (uint32_t l = 0; l < hp_.n_layers; ++l) {
      const Layer& L = layers_[l];
      auto xn = rmsnorm(x, L.attn_norm);
      auto q = matvec(L.wq, xn, hp_.q_dim());
      auto k = matvec(L.wk, xn, hp_.kv_dim());
      auto v = matvec(L.wv, xn, hp_.kv_dim());
      if (hp_.qkv_bias) {
        for (size_t i = 0; i < q.size(); ++i) q[i] += L.bq[i];
        for (size_t i = 0; i < k.size(); ++i) k[i] += L.bk[i], v[i] += L.bv[i];
      }
      if (hp_.qk_norm) {  // qwen3: each head normalised on its own, before rope
        for (int h = 0; h < nh; ++h) norm_head(&q[size_t(h) * hd], L.q_norm);
        for (int h = 0; h < nkv; ++h) norm_head(&k[size_t(h) * hd], L.k_norm);
      }
      for (int h = 0; h < nh; ++h) rotate(&q[size_t(h) * hd], pos);
      for (int h = 0; h < nkv; ++h) rotate(&k[size_t(h) * hd], pos);
      kcache_[l].push_back(k);
      vcache_[l].push_back(v);
      std::vector<float> att(hp_.q_dim(), 0.0f);
      const int group = nh / nkv;
      for (int h = 0; h < nh; ++h) {
        const int kvh = h / group;
        std::vector<double> scores(pos + 1);
        double mx = -1e300;
        for (int p = 0; p <= pos; ++p) {
          double s = 0;
          for (int i = 0; i < hd; ++i)
            s += double(q[size_t(h) * hd + i]) * kcache_[l][p][size_t(kvh) * hd + i];
          scores[p] = s / std::sqrt(double(hd));
          mx = std::max(mx, scores[p]);
        }
        double sum = 0;
        for (auto& s : scores) sum += (s = std::exp(s - mx));
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int p = 0; p <= pos; ++p)
            acc += scores[p] / sum * vcache_[l][p][size_t(kvh) * hd + i];
          att[size_t(h) * hd + i] = float(acc);
        }
      }
      auto o = matvec(L.wo, att, dim);
      for (int i = 0; i < dim; ++i) x[i] += o[i];
      xn = rmsnorm(x, L.ffn_norm);
      if (!hp_.is_moe()) {
        const auto d = swiglu(L.wg.data(), L.wu.data(), L.wd.data(), xn, hp_.ffn);
        for (int i = 0; i < dim; ++i) x[i] += d[i];
        continue;
      }
      // Router: softmax over all experts, the k most probable, their probabilities rescaled
      // to sum to 1, the experts' outputs added with those weights.
      const auto logits = matvec(L.router, xn, hp_.n_experts);
      std::vector<double> prob(hp_.n_experts);
      const double mx = *std::max_element(logits.begin(), logits.end());
      for (size_t e = 0; e < prob.size(); ++e) prob[e] = std::exp(logits[e] - mx);
      std::vector<int> order(hp_.n_experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
      order.resize(hp_.n_experts_used);
      double kept = 0;
      for (int e : order) kept += prob[e];
      const size_t fe = hp_.ffn_expert, width = fe * dim;
      for (int e : order) {
        const auto d = swiglu(L.wg.data() + e * width, L.wu.data() + e * width,
                              L.wd.data() + e * width, xn, fe);
        for (int i = 0; i < dim; ++i) x[i] += float(prob[e] / kept * d[i]);
      }
    }
    return matvec(output_, rmsnorm(x, out_norm_), hp_.vocab);
  }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, bq, bk, bv, q_norm, k_norm, ffn_norm, wg, wu, wd;
    std::vector<float> router;  // (n_experts, dim); wg/wu/wd then hold every expert, in order
  };

  // A SwiGLU block of width ffn: down(silu(gate x) * up x), matrices row-major.
  std::vector<float> swiglu(const float* wg, const float* wu, const float* wd,
                            const std::vector<float>& xn, size_t ffn) const {
    const size_t dim = xn.size();
    std::vector<float> g(ffn), d(dim);
    for (size_t r = 0; r < ffn; ++r) {
      double a = 0, b = 0;
      for (size_t c = 0; c < dim; ++c) a += double(wg[r * dim + c]) * xn[c];
      for (size_t c = 0; c < dim; ++c) b += double(wu[r * dim + c]) * xn[c];
      g[r] = float(a / (1.0 + std::exp(-a)) * b);
    }
    for (size_t r = 0; r < dim; ++r) {
      double acc = 0;
      for (size_t c = 0; c < ffn; ++c) acc += double(wd[r * ffn + c]) * g[c];
      d[r] = float(acc);
    }
    return d;
  }

  void norm_head(float* v, const std::vector<float>& w) const {
    const std::vector<float> head(v, v + hp_.head_dim);
    const auto out = rmsnorm(head, w);
    std::copy(out.begin(), out.end(), v);
  }

  std::vector<float> rmsnorm(const std::vector<float>& x, const std::vector<float>& w) const {
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + hp_.rms_eps);
    std::vector<float> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = float(x[i] * inv * w[i]);
    return out;
  }

  // w is (rows, cols) row-major with cols = x.size().
  static std::vector<float> matvec(const std::vector<float>& w, const std::vector<float>& x,
                                   size_t rows) {
    std::vector<float> y(rows);
    const size_t cols = x.size();
    for (size_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += double(w[r * cols + c]) * x[c];
      y[r] = float(acc);
    }
    return y;
  }

  // Rotary embedding of one head: llama rotates pairs (2i, 2i+1), qwen2/qwen3 pairs (i, i + d/2).
  void rotate(float* v, int pos) const {
    const int d = hp_.head_dim;
    for (int i = 0; i < d / 2; ++i) {
      double theta =
          pos * double(hp_.rope_freq_scale) * std::pow(double(hp_.rope_base), -2.0 * i / d);
      if (!rope_freqs_.empty()) theta /= rope_freqs_[i];
      const double c = std::cos(theta), s = std::sin(theta);
      const bool neox = hp_.arch != model::Arch::kLlama;
      const int a = neox ? i : 2 * i;
      const int b = neox ? i + d / 2 : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = float(x0 * c - x1 * s);
      v[b] = float(x0 * s + x1 * c);
    }
  }

  model::HParams hp_;
  std::vector<float> embd_, out_norm_, output_, rope_freqs_;
  std::vector<Layer> layers_;
  std::vector<std::vector<std::vector<float>>> kcache_, vcache_;  // (layer, pos, kv_dim)
  int n_pos_ = 0;
};

}  // namespace hearth::testing
