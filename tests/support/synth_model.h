// A synthetic llama-family model written for a test (model/synth.h), one call with the shape.
#pragma once

#include <string>

#include "hearth/model/presets.h"
#include "hearth/model/synth.h"

namespace hearth::testing {

struct ModelShape {
  int layers = 4;
  int dim = 256;
  int heads = 4;
  int kv_heads = 2;
  int ffn = 512;
  int vocab = 512;
  const char* types = "q8_0";  // model::parse_type_recipe
  uint64_t seed = 7;
};

// Writes the model to `path` and returns `path`.
inline std::string write_model(const std::string& path, const ModelShape& s) {
  model::SynthOptions opt;
  opt.hp.arch = model::Arch::kLlama;
  opt.hp.n_layers = static_cast<uint32_t>(s.layers);
  opt.hp.dim = static_cast<uint32_t>(s.dim);
  opt.hp.n_heads = static_cast<uint32_t>(s.heads);
  opt.hp.n_kv_heads = static_cast<uint32_t>(s.kv_heads);
  opt.hp.head_dim = static_cast<uint32_t>(s.dim / s.heads);
  opt.hp.ffn = static_cast<uint32_t>(s.ffn);
  opt.hp.vocab = static_cast<uint32_t>(s.vocab);
  opt.hp.ctx_train = 4096;
  opt.types = model::parse_type_recipe(s.types);
  opt.seed = s.seed;
  opt.name = "test-model";
  opt.threads = 2;
  model::write_synthetic_model(opt, path);
  return path;
}

// A mixture of experts for a test: the tiny-qwen3moe preset (16 experts of width 256, 4 per
// token) with `layers` layers and a 512-token vocabulary. Writes it to `path`, returns `path`.
inline std::string write_moe_model(const std::string& path, int layers, const char* types,
                                   uint64_t seed) {
  model::SynthOptions opt;
  opt.hp = model::find_preset("tiny-qwen3moe").hparams;
  opt.hp.n_layers = static_cast<uint32_t>(layers);
  opt.hp.vocab = 512;
  opt.types = model::parse_type_recipe(types);
  opt.seed = seed;
  opt.threads = 2;
  model::write_synthetic_model(opt, path);
  return path;
}

}  // namespace hearth::testing
