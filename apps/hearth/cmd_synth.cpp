// `hearth synth`: write a random-weight model of any shape and type (see model/synth.h).
#include <fmt/core.h>

#include <algorithm>

#include "commands.h"
#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/model/presets.h"
#include "hearth/model/synth.h"

namespace hearth::cli {
namespace {

// The flags that set one field of the model's shape each: declared and applied from this one
// list, so a flag cannot be read and then left out of the shape.
struct ShapeFlag {
  const char* name;
  uint32_t model::HParams::*field;
  const char* help;
};
constexpr ShapeFlag kShapeFlags[] = {
    {"--layers", &model::HParams::n_layers, "number of blocks"},
    {"--dim", &model::HParams::dim, "embedding length"},
    {"--heads", &model::HParams::n_heads, "query heads"},
    {"--kv-heads", &model::HParams::n_kv_heads, "key/value heads"},
    {"--head-dim", &model::HParams::head_dim, "head dimension (default dim / heads)"},
    {"--ffn", &model::HParams::ffn, "feed-forward length"},
    {"--vocab", &model::HParams::vocab, "vocabulary size"},
};

int run_synth(const Args& args) {
  CLI::App app{"Write a synthetic (random-weight) GGUF model laid out like llama.cpp's converter",
               "synth"};
  std::string preset, arch = "llama", type = "q4_k_m", out;
  double scale = 1.0;
  model::HParams given;  // the shape flags' values: 0 where a flag is not given
  uint64_t seed = 1;
  bool tied = false, untied = false, rope_freqs = false;
  int threads = 0;
  app.add_option("--preset", preset, "named real shape (tiny-llama, llama3-8b, qwen2.5-7b, ...)");
  app.add_option("--scale", scale, "shrink dim/heads/ffn by this factor, keeping the layers");
  app.add_option("--arch", arch, "llama, qwen2, qwen3 or qwen3moe")
      ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3moe"}));
  for (const ShapeFlag& f : kShapeFlags) app.add_option(f.name, given.*f.field, f.help);
  uint32_t experts = 0, experts_used = 0, expert_ffn = 0;
  std::string expert_layout = "merged";
  app.add_option("--experts", experts,
                 "experts per layer: a mixture of experts (llama: Mixtral's layout)");
  app.add_option("--experts-used", experts_used, "experts per token (default 2, qwen3moe 8)");
  app.add_option("--expert-ffn", expert_ffn,
                 "feed-forward length of one expert (default: --ffn for llama, ffn / 8 for "
                 "qwen3moe)");
  app.add_option("--expert-layout", expert_layout,
                 "merged: one tensor per kind and layer (ffn_gate_exps); split: each expert's "
                 "own tensors (ffn_gate.E), as older Mixtral files")
      ->check(CLI::IsMember({"merged", "split"}));
  app.add_option("--ctx", given.ctx_train, "training context length written to the file");
  app.add_option("--type", type, "f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k q4_k_m q5_k_m");
  app.add_option("--seed", seed, "random seed");
  app.add_flag("--tied", tied, "tie the output layer to the token embedding");
  app.add_flag("--untied", untied, "force a separate output tensor");
  app.add_flag("--rope-freqs", rope_freqs, "add a Llama 3.1 style rope_freqs tensor");
  app.add_option("-t,--threads", threads, "threads for quantization (default: all cores)");
  app.add_option("-o,--output", out, "output GGUF file")->required();
  if (auto code = parse(app, args)) return *code;

  model::HParams hp;
  if (!preset.empty()) {
    hp = model::scale_hparams(model::find_preset(preset).hparams, scale);
  } else {
    hp.arch = arch == "qwen2"      ? model::Arch::kQwen2
              : arch == "qwen3"    ? model::Arch::kQwen3
              : arch == "qwen3moe" ? model::Arch::kQwen3Moe
                                   : model::Arch::kLlama;
    hp.n_layers = 4;
    hp.dim = 256;
    hp.n_heads = 4;
    hp.vocab = 1024;
    hp.ctx_train = 4096;
    hp.qkv_bias = hp.arch == model::Arch::kQwen2;
    hp.qk_norm = hp.arch == model::Arch::kQwen3 || hp.arch == model::Arch::kQwen3Moe;
    hp.rms_eps = model::is_qwen(hp.arch) ? 1e-6f : 1e-5f;
    hp.rope_base = model::is_qwen(hp.arch) ? 1000000.0f : 500000.0f;
  }
  // Explicit flags override the preset or the defaults.
  for (const ShapeFlag& f : kShapeFlags) {
    if (given.*f.field) hp.*f.field = given.*f.field;
  }
  if (given.ctx_train) hp.ctx_train = given.ctx_train;
  if (preset.empty()) {  // defaults that follow the flags
    if (hp.n_kv_heads == 0) hp.n_kv_heads = hp.n_heads;
    if (hp.ffn == 0) hp.ffn = 4 * hp.dim;
  }
  if (tied) hp.tied_embeddings = true;
  if (untied) hp.tied_embeddings = false;
  if (rope_freqs) hp.rope_freqs = true;
  const bool qwen3moe = hp.arch == model::Arch::kQwen3Moe;
  if (experts) hp.n_experts = experts;
  if (qwen3moe && !hp.is_moe()) hp.n_experts = 8;
  if (hp.is_moe()) {
    if (experts_used) hp.n_experts_used = experts_used;
    if (hp.n_experts_used == 0) hp.n_experts_used = std::min(hp.n_experts, qwen3moe ? 8u : 2u);
    if (expert_ffn) hp.ffn_expert = expert_ffn;
    if (hp.ffn_expert == 0) hp.ffn_expert = qwen3moe ? std::max(256u, hp.ffn / 8) : hp.ffn;
    hp.expert_layout =
        expert_layout == "split" ? model::ExpertLayout::kSplit : model::ExpertLayout::kMerged;
  } else if (experts_used || expert_ffn || expert_layout != "merged") {
    throw UsageError("--experts-used, --expert-ffn and --expert-layout need --experts");
  }
  // A preset's head width stays unless the flags change the width or the heads.
  const bool reshaped = preset.empty() || given.dim || given.n_heads || given.head_dim;
  if (reshaped && (hp.n_heads == 0 || hp.dim % hp.n_heads != 0)) {
    if (given.head_dim == 0) {
      throw UsageError("--dim must be a multiple of --heads (or give --head-dim)");
    }
  }
  if (reshaped) hp.head_dim = given.head_dim ? given.head_dim : hp.dim / hp.n_heads;

  model::SynthOptions opt;
  opt.hp = hp;
  opt.types = model::parse_type_recipe(type);
  opt.seed = seed;
  opt.threads = threads;
  opt.name = preset.empty() ? "synthetic-" + arch : "synthetic-" + preset;
  const double t0 = now_seconds();
  const uint64_t bytes = model::write_synthetic_model(opt, out);
  const std::string experts_text = hp.is_moe()
                                       ? fmt::format(", {} experts of {}, {} used", hp.n_experts,
                                                     hp.ffn_expert, hp.n_experts_used)
                                       : "";
  fmt::print(stderr,
             "hearth synth: wrote {} ({} {}, {} layers, dim {}, ffn {}{}, vocab {}, {:.1f} MiB) in "
             "{:.1f} s\n",
             out, model::arch_name(hp.arch), type, hp.n_layers, hp.dim, hp.ffn, experts_text,
             hp.vocab, bytes / 1048576.0, now_seconds() - t0);
  return 0;
}

HEARTH_COMMAND("synth", "write a random-weight GGUF model of any shape and type", run_synth);

}  // namespace
}  // namespace hearth::cli
