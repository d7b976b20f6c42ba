// Builds the planner's model profile (profile/model_profile.h) from hyperparameters plus the
// type of every weight tensor: a named preset with a quantization scheme, or the tensor list
// of a GGUF file. Also the working buffers a ring stage keeps, which the profile counts and
// the stage reserves.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/compute/kv_cache.h"
#include "hearth/model/hparams.h"
#include "hearth/profile/model_profile.h"

namespace hearth::gguf {
struct TensorInfo;
}

namespace hearth::profiler {

// Types a llama.cpp-style quantization scheme gives each tensor: "f32", "f16", "bf16",
// "q8_0", "q4_0", "q4_k", "q5_k", "q6_k" (every matrix that type, output q6_k for K-types),
// "q4_k_m" / "q5_k_m" (attn_v and ffn_down in q6_k on the first and last eighth of the layers
// and every third layer between). A row length the chosen block cannot store falls back to
// q8_0, then f16, as llama.cpp does for odd feed-forward sizes. UsageError lists the names.
profile::WeightTypes weight_types_for_scheme(const model::HParams& hp, std::string_view scheme);
std::vector<std::string_view> known_schemes();

// Working buffers of a ring stage for `kStageRows` rows (decode, short prompts, a few
// sequences decoding together). A longer prompt grows them for its step and gives them back
// after it (model::Engine::trim_scratch); decode is what the plan is for. On a device that
// streams, this reserve comes out of the same share of memory as the stream buffer (the
// pressure target), so it is kept small. (The stage also keeps 8 MiB of headroom for message
// buffers and stacks: process overhead, which a profile's available memory already leaves
// out.)
inline constexpr uint64_t kStageRows = 16;
uint64_t stage_working_bytes(const model::HParams& hp);

profile::ModelProfile profile_model(const model::HParams& hp, const profile::WeightTypes& types,
                                    std::string name);
// From the tensors of a GGUF file: types and byte sizes as stored. FormatError when a layer
// tensor the architecture needs is missing.
profile::ModelProfile profile_model(const model::HParams& hp,
                                    const std::vector<gguf::TensorInfo>& tensors, std::string name);
// Opens a GGUF file and profiles it (hyperparameters via model::load_hparams).
profile::ModelProfile profile_model_file(const std::string& path);
// Counts the KV cache in these element types (profiles count f16 K and V by default).
// UsageError when a type cannot hold the model's head rows.
void set_kv_types(profile::ModelProfile& p, compute::KvTypes types);
// A named preset (model/presets.h), optionally scaled, with a quantization scheme.
profile::ModelProfile profile_preset(std::string_view preset, double scale,
                                     std::string_view scheme);

}  // namespace hearth::profiler
