#include "hearth/model/synth.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hearth/base/error.h"
#include "hearth/base/half.h"
#include "hearth/gguf/gguf_writer.h"
#include "hearth/model/synth_vocab.h"
#include "hearth/quant/type_traits.h"

namespace hearth::model {

using gguf::TensorType;
using gguf::Value;
using gguf::ValueType;

TypeRecipe parse_type_recipe(const std::string& name) {
  TypeRecipe r;
  r.name = name;
  if (name == "q4_k_m" || name == "q5_k_m") {
    r.base = name == "q4_k_m" ? TensorType::kQ4_K : TensorType::kQ5_K;
    r.k_mixed = true;
    return r;
  }
  static const char* const kAccepted[] = {"f32",  "f16",  "bf16", "q8_0",
                                          "q4_0", "q4_k", "q5_k", "q6_k"};
  for (const char* a : kAccepted) {
    if (name == a) {
      r.base = *gguf::tensor_type_from_name(name);
      return r;
    }
  }
  throw UsageError("unknown --type '" + name +
                   "' (accepted: f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k q4_k_m q5_k_m)");
}

namespace {

// llama.cpp's rule for which layers of attn_v / ffn_down get more bits in *_K_M mixes: the
// first and last eighth of the layers and every third layer in between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

uint32_t file_type_code(const TypeRecipe& r) {
  // general.file_type as llama.cpp numbers its ftypes.
  if (r.name == "f32") return 0;
  if (r.name == "f16") return 1;
  if (r.name == "q4_0") return 2;
  if (r.name == "q8_0") return 7;
  if (r.name == "q4_k") return 14;  // closest: Q4_K_S
  if (r.name == "q4_k_m") return 15;
  if (r.name == "q5_k") return 16;
  if (r.name == "q5_k_m") return 17;
  if (r.name == "q6_k") return 18;
  if (r.name == "bf16") return 32;
  return 0;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// How a tensor's values are drawn: uniform noise of a given standard deviation around a mean.
struct Init {
  float mean = 0.0f;
  float stddev = 0.0f;
};

// Fills rows [r0, r1) of a (rows, cols) tensor: values come from a per-row RNG stream, so the
// contents do not depend on the thread count or on the storage type.
void fill_rows(uint8_t* dst, TensorType type, uint64_t cols, uint64_t r0, uint64_t r1, Init init,
               uint64_t seed) {
  const uint64_t row_bytes = *gguf::row_bytes(type, cols);
  std::vector<float> row(cols);
  const float half_width = init.stddev * std::sqrt(3.0f);  // uniform[-a, a] has stddev a/sqrt(3)
  for (uint64_t r = r0; r < r1; ++r) {
    uint64_t state = seed ^ (r * 0xd1b54a32d192ed03ull);
    for (uint64_t c = 0; c < cols; ++c) {
      const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
      row[c] = init.mean + half_width * static_cast<float>(2.0 * u - 1.0);
    }
    uint8_t* out = dst + r * row_bytes;
    if (type == TensorType::kF32) {
      std::memcpy(out, row.data(), cols * sizeof(float));
    } else {
      quant::traits(type).quantize(row.data(), out, static_cast<int64_t>(cols));
    }
  }
}

}  // namespace

TensorType tensor_type_for(const TypeRecipe& r, const HParams& hp, const std::string& name,
                           int layer) {
  // The converter writes the router as f32 and the quantizer leaves it so.
  const bool is_vector = name.find("_norm") != std::string::npos ||
                         name.find(".bias") != std::string::npos || name == "rope_freqs.weight" ||
                         name.find("ffn_gate_inp") != std::string::npos;
  if (is_vector) return TensorType::kF32;
  if (!r.k_mixed) return r.base;
  const bool output =
      name == "output.weight" || (hp.tied_embeddings && name == "token_embd.weight");
  if (output) return TensorType::kQ6_K;
  // The quantizer's rules for 8-expert models (Mixtral): attention k and v at q8_0, its output
  // at q5_k.
  const bool eight_experts = hp.n_experts == 8 && r.name == "q4_k_m";
  const bool attn_v = name.find("attn_v.weight") != std::string::npos;
  if (eight_experts && (attn_v || name.find("attn_k.weight") != std::string::npos))
    return TensorType::kQ8_0;
  if (eight_experts && name.find("attn_output.weight") != std::string::npos)
    return TensorType::kQ5_K;
  // ffn_down of a dense layer, and of every expert (ffn_down_exps, ffn_down.E).
  const bool more_bits_kind = attn_v || name.find("ffn_down") != std::string::npos;
  if (more_bits_kind && use_more_bits(layer, static_cast<int>(hp.n_layers)))
    return TensorType::kQ6_K;
  return r.base;
}

uint64_t write_synthetic_model(const SynthOptions& opt, const std::string& path) {
  const HParams& hp = opt.hp;
  if (hp.n_layers == 0 || hp.dim == 0 || hp.n_heads == 0 || hp.n_kv_heads == 0 || hp.ffn == 0) {
    throw UsageError("synth: layers, dim, heads, kv-heads and ffn must all be positive");
  }
  if (hp.n_heads % hp.n_kv_heads != 0)
    throw UsageError("synth: --heads must be a multiple of --kv-heads");
  if (hp.head_dim == 0 || hp.head_dim % 2 != 0)
    throw UsageError("synth: head dimension must be even");
  if (hp.dim % 32 != 0 || hp.ffn % 32 != 0)
    throw UsageError("synth: dim and ffn must be multiples of 32");
  if (hp.is_moe() && (hp.n_experts_used == 0 || hp.n_experts_used > hp.n_experts ||
                      hp.ffn_expert == 0 || hp.ffn_expert % 32 != 0)) {
    throw UsageError(
        "synth: --experts-used must be 1 to --experts, and the expert width a positive multiple "
        "of 32");
  }
  if (hp.arch == Arch::kQwen3Moe && !hp.is_moe())
    throw UsageError("synth: qwen3moe needs --experts");
  const SynthVocab vocab = make_synth_vocab(hp.arch, hp.vocab, opt.seed);

  gguf::GgufWriter w;
  const std::string a = arch_name(hp.arch);
  w.set("general.architecture", Value::string(a));
  w.set("general.name", Value::string(opt.name));
  w.set("general.file_type", Value::u32(file_type_code(opt.types)));
  if (opt.types.base != TensorType::kF32 && opt.types.base != TensorType::kF16 &&
      opt.types.base != TensorType::kBF16) {
    w.set("general.quantization_version", Value::u32(2));
  }
  w.set(a + ".block_count", Value::u32(hp.n_layers));
  w.set(a + ".context_length", Value::u32(hp.ctx_train));
  w.set(a + ".embedding_length", Value::u32(hp.dim));
  // A Mixtral file's feed-forward length is its experts' width.
  const bool mixtral = hp.is_moe() && hp.arch == Arch::kLlama;
  w.set(a + ".feed_forward_length", Value::u32(mixtral ? hp.ffn_expert : hp.ffn));
  w.set(a + ".attention.head_count", Value::u32(hp.n_heads));
  w.set(a + ".attention.head_count_kv", Value::u32(hp.n_kv_heads));
  w.set(a + ".rope.freq_base", Value::f32(hp.rope_base));
  w.set(a + ".attention.layer_norm_rms_epsilon", Value::f32(hp.rms_eps));
  if (hp.head_dim != hp.dim / hp.n_heads) {
    w.set(a + ".attention.key_length", Value::u32(hp.head_dim));
    w.set(a + ".attention.value_length", Value::u32(hp.head_dim));
  }
  w.set(a + ".rope.dimension_count", Value::u32(hp.head_dim));
  if (hp.rope_freq_scale != 1.0f) {
    w.set(a + ".rope.scaling.type", Value::string("linear"));
    w.set(a + ".rope.scaling.factor", Value::f32(1.0f / hp.rope_freq_scale));
  }
  if (hp.arch == Arch::kLlama) w.set(a + ".vocab_size", Value::u32(hp.vocab));
  if (hp.is_moe()) {
    w.set(a + ".expert_count", Value::u32(hp.n_experts));
    w.set(a + ".expert_used_count", Value::u32(hp.n_experts_used));
    if (hp.arch == Arch::kQwen3Moe) {
      w.set(a + ".expert_feed_forward_length", Value::u32(hp.ffn_expert));
    }
  }

  std::vector<Value> tokens, types, merges;
  tokens.reserve(vocab.tokens.size());
  for (const auto& t : vocab.tokens) tokens.push_back(Value::string(t));
  for (int32_t t : vocab.token_types) types.push_back(Value::i32(t));
  for (const auto& m : vocab.merges) merges.push_back(Value::string(m));
  w.set("tokenizer.ggml.model", Value::string(vocab.model));
  w.set("tokenizer.ggml.pre", Value::string(vocab.pre));
  w.set("tokenizer.ggml.tokens", Value::array(ValueType::kString, std::move(tokens)));
  w.set("tokenizer.ggml.token_type", Value::array(ValueType::kI32, std::move(types)));
  w.set("tokenizer.ggml.merges", Value::array(ValueType::kString, std::move(merges)));
  w.set("tokenizer.ggml.bos_token_id", Value::u32(vocab.bos));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(vocab.eos));
  w.set("tokenizer.ggml.eot_token_id", Value::u32(vocab.eot));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(vocab.add_bos));
  w.set("tokenizer.chat_template", Value::string(vocab.chat_template));

  const int threads =
      opt.threads > 0 ? opt.threads : std::max(1u, std::thread::hardware_concurrency());
  // Scales: inputs to every matmul have rms ~1 after rmsnorm, so weights of stddev
  // 1/sqrt(fan_in) keep outputs ~1; the two projections that add into the residual stream are
  // shrunk by 1/sqrt(2 L) so the stream grows slowly with depth.
  const float residual_scale = 1.0f / std::sqrt(2.0f * hp.n_layers);
  auto add = [&](const std::string& name, int layer, std::vector<uint64_t> shape, Init init) {
    const TensorType type = tensor_type_for(opt.types, hp, name, layer);
    const uint64_t cols = shape[0];
    uint64_t rows = 1;
    for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
    const uint64_t seed = opt.seed * 0x2545f4914f6cdd1dull ^ hash_name(name);
    w.add_tensor(name, type, std::move(shape), [=](uint8_t* dst, uint64_t) {
      const uint64_t n_threads = std::min<uint64_t>(static_cast<uint64_t>(threads), rows);
      if (n_threads <= 1) {
        fill_rows(dst, type, cols, 0, rows, init, seed);
        return;
      }
      std::vector<std::thread> pool;
      for (uint64_t t = 0; t < n_threads; ++t) {
        pool.emplace_back(fill_rows, dst, type, cols, rows * t / n_threads,
                          rows * (t + 1) / n_threads, init, seed);
      }
      for (auto& th : pool) th.join();
    });
  };
  const float in_dim = 1.0f / std::sqrt(static_cast<float>(hp.dim));
  // The embedding is small next to what the layers add (norm ~2 vs ~sqrt(dim / 2L) per
  // layer), so the residual stream is shaped by the layers rather than being a copy of the
  // input token; with tied embeddings this also keeps the output logits ~N(0, 4) instead of
  // letting the last input token win by a margin of ~dim (a model that only repeats itself
  // makes a weak test).
  add("token_embd.weight", -1, {hp.dim, hp.vocab}, {0.0f, 2.0f * in_dim});
  if (hp.rope_freqs) {
    // Llama 3.1 style factors: 1 for high frequencies rising to 8 for the lowest.
    const uint32_t n = hp.head_dim / 2;
    std::vector<uint8_t> bytes(n * 4);
    for (uint32_t i = 0; i < n; ++i) {
      const float f =
          1.0f + 7.0f * static_cast<float>(i) / static_cast<float>(std::max<uint32_t>(1, n - 1));
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    }
    w.add_tensor_bytes("rope_freqs.weight", TensorType::kF32, {n}, std::move(bytes));
  }
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    const int li = static_cast<int>(l);
    add(p + "attn_norm.weight", li, {hp.dim}, {1.0f, 0.1f});
    add(p + "attn_q.weight", li, {hp.dim, hp.q_dim()}, {0.0f, in_dim});
    add(p + "attn_k.weight", li, {hp.dim, hp.kv_dim()}, {0.0f, in_dim});
    add(p + "attn_v.weight", li, {hp.dim, hp.kv_dim()}, {0.0f, in_dim});
    if (hp.qkv_bias) {
      add(p + "attn_q.bias", li, {hp.q_dim()}, {0.0f, 0.1f});
      add(p + "attn_k.bias", li, {hp.kv_dim()}, {0.0f, 0.1f});
      add(p + "attn_v.bias", li, {hp.kv_dim()}, {0.0f, 0.1f});
    }
    if (hp.qk_norm) {
      add(p + "attn_q_norm.weight", li, {hp.head_dim}, {1.0f, 0.1f});
      add(p + "attn_k_norm.weight", li, {hp.head_dim}, {1.0f, 0.1f});
    }
    add(p + "attn_output.weight", li, {hp.q_dim(), hp.dim},
        {0.0f, residual_scale / std::sqrt(static_cast<float>(hp.q_dim()))});
    add(p + "ffn_norm.weight", li, {hp.dim}, {1.0f, 0.1f});
    if (!hp.is_moe()) {
      add(p + "ffn_gate.weight", li, {hp.dim, hp.ffn}, {0.0f, in_dim});
      add(p + "ffn_up.weight", li, {hp.dim, hp.ffn}, {0.0f, in_dim});
      add(p + "ffn_down.weight", li, {hp.ffn, hp.dim},
          {0.0f, residual_scale / std::sqrt(static_cast<float>(hp.ffn))});
      continue;
    }
    // Router logits of stddev ~2 make some experts clearly preferred per token, as a trained
    // router does, without ties.
    add(p + "ffn_gate_inp.weight", li, {hp.dim, hp.n_experts}, {0.0f, 2.0f * in_dim});
    const uint32_t fe = hp.ffn_expert, ne = hp.n_experts;
    const Init down{0.0f, residual_scale / std::sqrt(static_cast<float>(fe))};
    if (hp.expert_layout == ExpertLayout::kMerged) {
      add(p + "ffn_gate_exps.weight", li, {hp.dim, fe, ne}, {0.0f, in_dim});
      add(p + "ffn_down_exps.weight", li, {fe, hp.dim, ne}, down);
      add(p + "ffn_up_exps.weight", li, {hp.dim, fe, ne}, {0.0f, in_dim});
    } else {
      for (uint32_t e = 0; e < ne; ++e) {
        add(fmt::format("{}ffn_gate.{}.weight", p, e), li, {hp.dim, fe}, {0.0f, in_dim});
        add(fmt::format("{}ffn_down.{}.weight", p, e), li, {fe, hp.dim}, down);
        add(fmt::format("{}ffn_up.{}.weight", p, e), li, {hp.dim, fe}, {0.0f, in_dim});
      }
    }
  }
  add("output_norm.weight", -1, {hp.dim}, {1.0f, 0.1f});
  if (!hp.tied_embeddings) add("output.weight", -1, {hp.dim, hp.vocab}, {0.0f, 2.0f * in_dim});

  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  w.write_file(path);
  return std::filesystem::file_size(path);
}

}  // namespace hearth::model
