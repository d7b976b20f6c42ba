#include "hearth/model/presets.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "hearth/base/error.h"

namespace hearth::model {

namespace {

// A transformer of the given size; the family fixes vocabulary, context, norm epsilon, rope
// base, the q/k/v biases (qwen2) and the per-head q/k norms (qwen3).
constexpr HParams shape(Arch arch, uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv,
                        uint32_t ffn, bool tied) {
  const bool qwen = is_qwen(arch);
  HParams hp;
  hp.arch = arch;
  hp.n_layers = layers;
  hp.dim = dim;
  hp.n_heads = heads;
  hp.n_kv_heads = kv;
  hp.head_dim = dim / heads;
  hp.ffn = ffn;
  hp.vocab = qwen ? 152064 : 128256;
  hp.ctx_train = qwen ? 32768 : 8192;
  hp.rms_eps = qwen ? 1e-6f : 1e-5f;
  hp.rope_base = qwen ? 1000000.0f : 500000.0f;
  hp.tied_embeddings = tied;
  hp.qkv_bias = arch == Arch::kQwen2;
  hp.qk_norm = arch == Arch::kQwen3;
  return hp;
}

constexpr HParams llama3(uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv, uint32_t ffn,
                         bool tied) {
  return shape(Arch::kLlama, layers, dim, heads, kv, ffn, tied);
}

constexpr HParams qwen25(uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv, uint32_t ffn,
                         bool tied) {
  return shape(Arch::kQwen2, layers, dim, heads, kv, ffn, tied);
}

// Qwen 3: head_dim 128 whatever the width, vocabulary 151936, 40960 positions.
constexpr HParams qwen3(uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv, uint32_t ffn,
                        bool tied) {
  HParams hp = shape(Arch::kQwen3, layers, dim, heads, kv, ffn, tied);
  hp.head_dim = 128;
  hp.vocab = 151936;
  hp.ctx_train = 40960;
  return hp;
}

// `hp` with a feed-forward block of `n` experts of width `ffn`, `used` of them per token.
constexpr HParams with_experts(HParams hp, uint32_t n, uint32_t used, uint32_t ffn) {
  hp.n_experts = n;
  hp.n_experts_used = used;
  hp.ffn_expert = ffn;
  return hp;
}

// Qwen 3's mixtures of experts: 128 experts, 8 of them per token, the dense width unused.
constexpr HParams qwen3moe(uint32_t layers, uint32_t dim, uint32_t heads, uint32_t kv, uint32_t ffn,
                           uint32_t ffn_expert) {
  HParams hp = qwen3(layers, dim, heads, kv, ffn, false);
  hp.arch = Arch::kQwen3Moe;
  return with_experts(hp, 128, 8, ffn_expert);
}

// Mixtral: a llama whose feed-forward block is 8 experts of the dense width, 2 per token, with
// Mistral's 32000-token vocabulary.
constexpr HParams mixtral(uint32_t layers, uint32_t dim, uint32_t heads, uint32_t ffn,
                          uint32_t vocab, uint32_t ctx) {
  HParams hp = llama3(layers, dim, heads, 8, ffn, false);
  hp.vocab = vocab;
  hp.ctx_train = ctx;
  hp.rope_base = 1000000.0f;
  return with_experts(hp, 8, 2, ffn);
}

constexpr HParams tiny(Arch arch) {
  HParams hp = shape(arch, 4, 256, 4, 2, 512, false);
  hp.vocab = 1024;
  hp.ctx_train = 512;
  hp.rope_base = 10000.0f;
  return hp;
}

// Qwen 3's attention is wider than its stream (heads x 128 > dim), as here.
constexpr HParams tiny_qwen3() {
  HParams hp = tiny(Arch::kQwen3);
  hp.head_dim = 128;
  return hp;
}

// Small mixtures of experts for tests: 16 experts of width 256, 4 per token (qwen3moe), and
// 8 of width 512, 2 per token (Mixtral's layout).
constexpr HParams tiny_qwen3moe() {
  HParams hp = tiny_qwen3();
  hp.arch = Arch::kQwen3Moe;
  return with_experts(hp, 16, 4, 256);
}

constexpr HParams tiny_mixtral() {
  return with_experts(tiny(Arch::kLlama), 8, 2, 512);
}

// The model `make demo` generates: small enough to make in a second, 8 layers deep so a ring
// of three devices can take two rounds per token.
constexpr HParams demo() {
  HParams hp = tiny(Arch::kLlama);
  hp.n_layers = 8;
  hp.dim = 512;
  hp.n_heads = 8;
  hp.head_dim = 64;
  hp.ffn = 1536;
  hp.vocab = 4096;
  hp.ctx_train = 2048;
  hp.rope_base = 500000.0f;
  return hp;
}

// Shapes from the published configs of each family.
const std::array kPresets = {
    Preset{"demo", "the `make demo` model (llama, 8 layers, dim 512, GQA 8/2)", demo()},
    Preset{"tiny-llama", "4-layer llama for tests (dim 256, GQA 4/2)", tiny(Arch::kLlama)},
    Preset{"tiny-qwen2", "4-layer qwen2 for tests (dim 256, GQA 4/2, qkv bias)",
           tiny(Arch::kQwen2)},
    Preset{"tiny-qwen3", "4-layer qwen3 for tests (dim 256, GQA 4/2, head dim 128, q/k norms)",
           tiny_qwen3()},
    Preset{"tiny-qwen3moe", "4-layer qwen3moe for tests (dim 256, 16 experts of 256, 4 used)",
           tiny_qwen3moe()},
    Preset{"tiny-mixtral", "4-layer llama with 8 experts of 512, 2 used (Mixtral's layout)",
           tiny_mixtral()},
    Preset{"llama3-1b-shape", "Llama 3.2 1B shape (16 layers, dim 2048, ffn 8192, tied)",
           llama3(16, 2048, 32, 8, 8192, true)},
    Preset{"llama3-8b", "Llama 3 8B (32 layers, dim 4096)", llama3(32, 4096, 32, 8, 14336, false)},
    Preset{"llama3-70b", "Llama 3 70B (80 layers, dim 8192)",
           llama3(80, 8192, 64, 8, 28672, false)},
    Preset{"qwen2.5-7b", "Qwen 2.5 7B (28 layers, dim 3584)",
           qwen25(28, 3584, 28, 4, 18944, false)},
    Preset{"qwen2.5-14b", "Qwen 2.5 14B (48 layers, dim 5120)",
           qwen25(48, 5120, 40, 8, 13824, false)},
    Preset{"qwen2.5-32b", "Qwen 2.5 32B (64 layers, dim 5120)",
           qwen25(64, 5120, 40, 8, 27648, false)},
    Preset{"qwen2.5-72b", "Qwen 2.5 72B (80 layers, dim 8192)",
           qwen25(80, 8192, 64, 8, 29568, false)},
    Preset{"qwen3-0.6b", "Qwen 3 0.6B (28 layers, dim 1024, 16 heads of 128, tied)",
           qwen3(28, 1024, 16, 8, 3072, true)},
    Preset{"qwen3-8b", "Qwen 3 8B (36 layers, dim 4096)", qwen3(36, 4096, 32, 8, 12288, false)},
    Preset{"qwen3-14b", "Qwen 3 14B (40 layers, dim 5120)", qwen3(40, 5120, 40, 8, 17408, false)},
    Preset{"qwen3-32b", "Qwen 3 32B (64 layers, dim 5120, 64 heads of 128)",
           qwen3(64, 5120, 64, 8, 25600, false)},
    Preset{"qwen3-30b-a3b", "Qwen 3 30B-A3B (48 layers, dim 2048, 128 experts of 768, 8 used)",
           qwen3moe(48, 2048, 32, 4, 6144, 768)},
    Preset{"qwen3-235b-a22b", "Qwen 3 235B-A22B (94 layers, dim 4096, 128 experts of 1536, 8 used)",
           qwen3moe(94, 4096, 64, 4, 12288, 1536)},
    Preset{"mixtral-8x7b", "Mixtral 8x7B (32 layers, dim 4096, 8 experts of 14336, 2 used)",
           mixtral(32, 4096, 32, 14336, 32000, 32768)},
    Preset{"mixtral-8x22b", "Mixtral 8x22B (56 layers, dim 6144, 8 experts of 16384, 2 used)",
           mixtral(56, 6144, 48, 16384, 32768, 65536)},
};

uint32_t round_to(double x, uint32_t multiple) {
  const auto n = static_cast<uint32_t>(std::llround(x / multiple));
  return std::max<uint32_t>(1, n) * multiple;
}

}  // namespace

std::span<const Preset> presets() {
  return kPresets;
}

const Preset& find_preset(std::string_view name) {
  for (const auto& p : kPresets) {
    if (p.name == name) return p;
  }
  std::string known;
  for (const auto& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw UsageError("unknown preset '" + std::string(name) + "' (known: " + known + ")");
}

HParams scale_hparams(const HParams& hp, double scale) {
  if (!(scale > 0.0 && scale <= 1.0)) throw UsageError("--scale must be in (0, 1]");
  if (scale == 1.0) return hp;
  HParams out = hp;
  // Keep head_dim (rope and attention behave the same) and the GQA ratio; shrink the head
  // count. dim = heads * head_dim must stay a multiple of 256 for K-quants.
  const uint32_t group = hp.n_heads / std::max<uint32_t>(1, hp.n_kv_heads);
  uint32_t kv = std::max<uint32_t>(1, static_cast<uint32_t>(std::llround(hp.n_kv_heads * scale)));
  while ((kv * group * hp.head_dim) % 256 != 0) ++kv;
  out.n_kv_heads = kv;
  out.n_heads = kv * group;
  // The stream keeps its ratio to the attention width (equal for llama and qwen2; qwen3's
  // 32B attends over 64 x 128 = 8192 from a stream of 5120).
  out.dim = round_to(static_cast<double>(hp.dim) * out.n_heads / hp.n_heads, 256);
  out.ffn = round_to(hp.ffn * (static_cast<double>(out.dim) / hp.dim), 256);
  if (hp.is_moe()) {  // expert count and top-k stay: they set how much of a layer a token reads
    out.ffn_expert = round_to(hp.ffn_expert * (static_cast<double>(out.dim) / hp.dim), 256);
  }
  return out;
}

}  // namespace hearth::model
