// `hearth synth`: writes a complete random-weight GGUF model laid out as llama.cpp's
// converter lays it out (keys, tensor names, shapes, per-tensor types), so every code path
// that reads a real model runs on it. Weights are random but scaled so activations stay
// finite through 80 layers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hearth/gguf/tensor_type.h"
#include "hearth/model/hparams.h"

namespace hearth::model {

// A weight-type recipe: one type for every 2-D weight, or a llama.cpp-style mix.
struct TypeRecipe {
  std::string name;  // "f32", "q8_0", "q4_k_m", ...
  gguf::TensorType base = gguf::TensorType::kF32;
  bool k_mixed = false;  // *_k_m: some tensors (output, parts of attn_v / ffn_down) get Q6_K
};
// Throws UsageError listing the accepted names.
TypeRecipe parse_type_recipe(const std::string& name);

struct SynthOptions {
  HParams hp;
  TypeRecipe types;
  uint64_t seed = 1;
  std::string name = "hearth-synthetic";
  int threads = 0;  // 0: all cores
};

// The type llama.cpp's quantizer would give tensor `name` (a weight of layer `layer`, or -1).
gguf::TensorType tensor_type_for(const TypeRecipe& r, const HParams& hp, const std::string& name,
                                 int layer);

// Writes the model to `path` (atomically). Returns the file size in bytes.
uint64_t write_synthetic_model(const SynthOptions& opt, const std::string& path);

}  // namespace hearth::model
