#include "hearth/model/hparams.h"

#include <fmt/core.h>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"

namespace hearth::model {

namespace {
using enum Arch;
constexpr EnumName<Arch> kArchNames[] = {
    {kLlama, "llama"}, {kQwen2, "qwen2"}, {kQwen3, "qwen3"}, {kQwen3Moe, "qwen3moe"}};
}  // namespace

const char* arch_name(Arch arch) {
  return enum_name(kArchNames, arch, "llama").data();
}

namespace {

// Bounds far above any real model, so that a hostile file is refused here, naming the key,
// rather than by an allocation failure or an overflowing product later.
constexpr uint64_t kMaxLayers = 4096;
constexpr uint64_t kMaxWidth = 1 << 17;      // embedding_length
constexpr uint64_t kMaxFfn = 1 << 20;        // feed_forward_length
constexpr uint64_t kMaxHeads = 4096;         // head_count, head_count_kv
constexpr uint64_t kMaxHeadDim = 4096;       // key_length
constexpr uint64_t kMaxAttnWidth = 1 << 20;  // head_count * key_length
constexpr uint64_t kMaxContext = 1 << 24;
constexpr uint64_t kMaxVocab = 1 << 22;
constexpr uint64_t kMaxExperts = 1024;  // expert_count (the largest models have 256-384)

uint32_t require_u32(const gguf::GgufFile& f, const std::string& key, uint64_t max) {
  const auto v = f.get_u64(key);
  if (!v) throw FormatError(fmt::format("{}: metadata '{}' is missing", f.path(), key));
  if (*v == 0 || *v > max) {
    throw FormatError(
        fmt::format("{}: metadata '{}' = {} is out of range (1 to {})", f.path(), key, *v, max));
  }
  return static_cast<uint32_t>(*v);
}

// The mixture-of-experts keys. qwen3moe requires them; a llama file has experts when it has
// expert_count (Mixtral). The expert width is the feed-forward length for Mixtral and
// expert_feed_forward_length for qwen3moe, where feed_forward_length is a dense width the
// model does not use.
void load_experts(const gguf::GgufFile& f, const std::string& p, HParams& hp) {
  const bool declared = f.find(p + "expert_count") != nullptr;
  if (!declared && hp.arch != Arch::kQwen3Moe) return;
  hp.n_experts = require_u32(f, p + "expert_count", kMaxExperts);
  hp.n_experts_used = require_u32(f, p + "expert_used_count", kMaxExperts);
  if (hp.n_experts_used > hp.n_experts) {
    throw FormatError(fmt::format("{}: metadata '{}expert_used_count' = {} exceeds expert_count {}",
                                  f.path(), p, hp.n_experts_used, hp.n_experts));
  }
  hp.ffn_expert = f.find(p + "expert_feed_forward_length")
                      ? require_u32(f, p + "expert_feed_forward_length", kMaxFfn)
                      : hp.ffn;
  if (f.find_tensor("blk.0.ffn_gate_exps.weight") != nullptr) {
    hp.expert_layout = ExpertLayout::kMerged;
  } else if (f.find_tensor("blk.0.ffn_gate.0.weight") != nullptr) {
    hp.expert_layout = ExpertLayout::kSplit;
  } else {
    throw FormatError(
        fmt::format("{}: metadata '{}expert_count' = {} but neither tensor "
                    "'blk.0.ffn_gate_exps.weight' nor 'blk.0.ffn_gate.0.weight' is there",
                    f.path(), p, hp.n_experts));
  }
}

}  // namespace

HParams load_hparams(const gguf::GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) throw FormatError(f.path() + ": metadata 'general.architecture' is missing");
  HParams hp;
  if (*arch == "llama") {
    hp.arch = Arch::kLlama;
  } else if (*arch == "qwen2") {
    hp.arch = Arch::kQwen2;
  } else if (*arch == "qwen3") {
    hp.arch = Arch::kQwen3;
  } else if (*arch == "qwen3moe") {
    hp.arch = Arch::kQwen3Moe;
  } else {
    throw UsageError(fmt::format(
        "{}: architecture '{}' is not supported (supported: llama, qwen2, qwen3, qwen3moe)",
        f.path(), *arch));
  }
  const std::string p = *arch + ".";
  hp.n_layers = require_u32(f, p + "block_count", kMaxLayers);
  hp.dim = require_u32(f, p + "embedding_length", kMaxWidth);
  hp.ffn = require_u32(f, p + "feed_forward_length", kMaxFfn);
  hp.n_heads = require_u32(f, p + "attention.head_count", kMaxHeads);
  hp.n_kv_heads = f.find(p + "attention.head_count_kv")
                      ? require_u32(f, p + "attention.head_count_kv", kMaxHeads)
                      : hp.n_heads;
  hp.ctx_train = require_u32(f, p + "context_length", kMaxContext);
  hp.head_dim = f.find(p + "attention.key_length")
                    ? require_u32(f, p + "attention.key_length", kMaxHeadDim)
                    : hp.dim / hp.n_heads;
  if (hp.head_dim == 0) {
    throw FormatError(fmt::format("{}: embedding_length {} is smaller than head_count {}", f.path(),
                                  hp.dim, hp.n_heads));
  }
  if (uint64_t{hp.n_heads} * hp.head_dim > kMaxAttnWidth) {
    throw FormatError(
        fmt::format("{}: metadata '{}attention.head_count' {} x key length {} is "
                    "out of range (at most {})",
                    f.path(), p, hp.n_heads, hp.head_dim, kMaxAttnWidth));
  }
  if (f.find(p + "attention.value_length") &&
      require_u32(f, p + "attention.value_length", kMaxHeadDim) != hp.head_dim) {
    throw UsageError(f.path() + ": key_length != value_length is not supported");
  }
  if (hp.n_heads % hp.n_kv_heads != 0) {
    throw FormatError(fmt::format("{}: head_count {} is not a multiple of head_count_kv {}",
                                  f.path(), hp.n_heads, hp.n_kv_heads));
  }
  if (hp.head_dim % 2 != 0) throw FormatError(f.path() + ": head dimension must be even for rope");
  if (const auto eps = f.get_f64(p + "attention.layer_norm_rms_epsilon")) {
    if (!(*eps > 0 && *eps < 1)) {
      throw FormatError(
          fmt::format("{}: metadata '{}attention.layer_norm_rms_epsilon' = {} is "
                      "out of range (0 to 1)",
                      f.path(), p, *eps));
    }
    hp.rms_eps = static_cast<float>(*eps);
  } else
    throw FormatError(f.path() + ": metadata '" + p +
                      "attention.layer_norm_rms_epsilon' is missing");
  if (const auto base = f.get_f64(p + "rope.freq_base")) {
    if (!(*base > 0 && *base < 1e30)) {
      throw FormatError(
          fmt::format("{}: metadata '{}rope.freq_base' = {} is out of range", f.path(), p, *base));
    }
    hp.rope_base = static_cast<float>(*base);
  }
  if (const auto type = f.get_string(p + "rope.scaling.type")) {
    if (*type == "linear") {
      const auto factor = f.get_f64(p + "rope.scaling.factor");
      if (!factor || !(*factor > 0 && *factor < 1e6))
        throw FormatError(f.path() + ": linear rope scaling without a factor");
      hp.rope_freq_scale = static_cast<float>(1.0 / *factor);
    } else if (*type != "none") {
      throw UsageError(fmt::format("{}: rope scaling '{}' is not supported", f.path(), *type));
    }
  }
  if (const auto rdim = f.get_u64(p + "rope.dimension_count"); rdim && *rdim != hp.head_dim) {
    throw UsageError(
        fmt::format("{}: partial rope (dimension_count {} != head dim {}) is not supported",
                    f.path(), *rdim, hp.head_dim));
  }

  const auto* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) throw FormatError(f.path() + ": tensor 'token_embd.weight' is missing");
  if (embd->shape.size() != 2 || embd->shape[0] != hp.dim) {
    throw FormatError(fmt::format("{}: token_embd.weight shape does not match embedding_length {}",
                                  f.path(), hp.dim));
  }
  if (embd->shape[1] == 0 || embd->shape[1] > kMaxVocab) {
    throw FormatError(fmt::format("{}: token_embd.weight has {} rows (1 to {} allowed)", f.path(),
                                  embd->shape[1], kMaxVocab));
  }
  hp.vocab = static_cast<uint32_t>(embd->shape[1]);
  // Every block the metadata promises must be in the file (its last one at least).
  if (f.find_tensor(fmt::format("blk.{}.attn_norm.weight", hp.n_layers - 1)) == nullptr) {
    throw FormatError(
        fmt::format("{}: metadata '{}block_count' = {} but tensor "
                    "'blk.{}.attn_norm.weight' is missing",
                    f.path(), p, hp.n_layers, hp.n_layers - 1));
  }
  hp.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  hp.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  hp.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  hp.rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
  load_experts(f, p, hp);
  return hp;
}

}  // namespace hearth::model
