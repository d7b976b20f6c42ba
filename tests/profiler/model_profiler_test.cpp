// The model profiler against published parameter counts and file sizes.
#include <gtest/gtest.h>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/presets.h"
#include "hearth/profiler/model_profiler.h"

namespace hearth::profiler {
namespace {

using gguf::TensorType;

TEST(ModelProfile, Llama3_8bInF16HasThePublishedParameterCount) {
  const auto& hp = model::find_preset("llama3-8b").hparams;
  const auto p = profile_model(hp, weight_types_for_scheme(hp, "f16"), "8b");
  // Meta-Llama-3-8B has 8,030,261,248 parameters; norms (2 per layer + the output norm,
  // 4096 each) are stored as f32, two bytes more each than f16.
  const double norms = (2.0 * 32 + 1) * 4096;
  EXPECT_DOUBLE_EQ(p.total_weight_bytes(), 2.0 * 8030261248.0 + 2.0 * norms);
  EXPECT_EQ(p.kv_bytes_per_token, 2u * 2u * 8u * 128u);  // f16 K and V, 8 KV heads of 128
  EXPECT_EQ(p.hidden_bytes, 4u * 4096u);
  // Two FLOPs per weight of the layer's seven matrices.
  const double layer_weights = 4096.0 * 4096 * 2 + 1024.0 * 4096 * 2 + 3 * 4096.0 * 14336;
  EXPECT_DOUBLE_EQ(p.mean_layer.flops.at(TensorType::kF16), 2 * layer_weights);
}

TEST(ModelProfile, Llama3_8bQ4KMIsCloseToThePublishedFileSize) {
  const auto& hp = model::find_preset("llama3-8b").hparams;
  const auto p = profile_model(hp, weight_types_for_scheme(hp, "q4_k_m"), "8b");
  // Meta-Llama-3-8B-Instruct Q4_K_M GGUF files are 4.92e9 bytes; the tensor types of
  // llama.cpp's mix vary a little between versions, so allow 3%.
  EXPECT_NEAR(p.total_weight_bytes(), 4.92e9, 0.03 * 4.92e9);
  EXPECT_GT(p.mean_layer.bytes.at(TensorType::kQ6_K), 0u);  // the 6-bit layers of the mix
  EXPECT_EQ(p.output_flops.count(TensorType::kQ6_K), 1u);
}

TEST(ModelProfile, StreamUnitIsTheLargestWeightGroupOfALayer) {
  // Llama-3-8B in q4_k_m: gate + up in q4_k (2 * 14336 * 4096 * 144 / 256 bytes) outweigh
  // down in q6_k (14336 * 4096 * 210 / 256) and the attention groups.
  const auto p = profile_preset("llama3-8b", 1.0, "q4_k_m");
  EXPECT_EQ(p.stream_unit_bytes, 2ull * 14336 * 4096 * 144 / 256);
}

TEST(ModelProfile, RowsTheBlockCannotStoreFallBackToQ8_0) {
  const auto& hp = model::find_preset("qwen2.5-72b").hparams;  // ffn 29568 = 115.5 * 256
  const auto wt = weight_types_for_scheme(hp, "q4_k");
  EXPECT_EQ(wt.layers[0].ffn_down, TensorType::kQ8_0);
  EXPECT_EQ(wt.layers[0].ffn_up, TensorType::kQ4_K);
}

TEST(ModelProfile, TensorListGivesTheSameProfileAsTheScheme) {
  const auto hp = model::find_preset("tiny-qwen2").hparams;
  const auto wt = weight_types_for_scheme(hp, "q4_k_m");
  const auto from_scheme = profile_model(hp, wt, "tiny");
  std::vector<gguf::TensorInfo> tensors;
  auto add = [&](std::string name, TensorType t, uint64_t cols, uint64_t rows) {
    gguf::TensorInfo ti;
    ti.name = std::move(name);
    ti.type = t;
    ti.shape = rows == 1 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
    ti.bytes = rows * *gguf::row_bytes(t, cols);
    tensors.push_back(ti);
  };
  for (uint32_t i = 0; i < hp.n_layers; ++i) {
    const auto& l = wt.layers[i];
    const std::string b = "blk." + std::to_string(i) + ".";
    add(b + "attn_norm.weight", TensorType::kF32, hp.dim, 1);
    add(b + "attn_q.weight", l.attn_q, hp.dim, hp.q_dim());
    add(b + "attn_q.bias", TensorType::kF32, hp.q_dim(), 1);
    add(b + "attn_k.weight", l.attn_k, hp.dim, hp.kv_dim());
    add(b + "attn_k.bias", TensorType::kF32, hp.kv_dim(), 1);
    add(b + "attn_v.weight", l.attn_v, hp.dim, hp.kv_dim());
    add(b + "attn_v.bias", TensorType::kF32, hp.kv_dim(), 1);
    add(b + "attn_output.weight", l.attn_output, hp.q_dim(), hp.dim);
    add(b + "ffn_norm.weight", TensorType::kF32, hp.dim, 1);
    add(b + "ffn_gate.weight", l.ffn_gate, hp.dim, hp.ffn);
    add(b + "ffn_up.weight", l.ffn_up, hp.dim, hp.ffn);
    add(b + "ffn_down.weight", l.ffn_down, hp.ffn, hp.dim);
  }
  add("token_embd.weight", wt.token_embd, hp.dim, hp.vocab);
  add("output_norm.weight", TensorType::kF32, hp.dim, 1);
  add("output.weight", wt.output, hp.dim, hp.vocab);
  const auto from_file = profile_model(hp, tensors, "tiny.gguf");
  EXPECT_DOUBLE_EQ(from_file.layer_bytes, from_scheme.layer_bytes);
  EXPECT_EQ(from_file.input_bytes, from_scheme.input_bytes);
  EXPECT_EQ(from_file.output_bytes, from_scheme.output_bytes);
  EXPECT_EQ(from_file.stream_unit_bytes, from_scheme.stream_unit_bytes);
  EXPECT_GT(from_scheme.stream_unit_bytes, 0u);
  for (const auto& [t, f] : from_scheme.mean_layer.flops) {
    if (t == TensorType::kF32) continue;  // vectors: the file path counts no FLOPs for them
    EXPECT_DOUBLE_EQ(from_file.mean_layer.flops.at(t), f) << gguf::tensor_type_name(t);
  }
  tensors.erase(tensors.begin() + 1);  // blk.0.attn_q.weight
  EXPECT_THROW(profile_model(hp, tensors, "broken.gguf"), FormatError);
}

TEST(ModelProfile, UnknownSchemeListsTheKnownOnes) {
  const auto& hp = model::find_preset("tiny-llama").hparams;
  try {
    weight_types_for_scheme(hp, "q3_x");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k_m"), std::string::npos);
  }
}

}  // namespace
}  // namespace hearth::profiler
