// Named model shapes of real model families, used by `hearth synth --preset`, by the planner
// (`hearth plan --preset`) and by benchmarks. Only shapes: weights are always synthetic.
#pragma once

#include <span>
#include <string_view>

#include "hearth/model/hparams.h"

namespace hearth::model {

struct Preset {
  std::string_view name;
  std::string_view description;
  HParams hparams;
};

std::span<const Preset> presets();
// Throws UsageError listing the known names when `name` is unknown.
const Preset& find_preset(std::string_view name);

// Shrinks dim, heads and ffn by `scale` (0 < scale <= 1), keeping the layer count, GQA ratio
// and head_dim alignment, so a benchmark keeps the depth of a real model on a small machine.
// Dimensions stay multiples of 256 so every K-quant can store them.
HParams scale_hparams(const HParams& hp, double scale);

}  // namespace hearth::model
