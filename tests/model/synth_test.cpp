#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <cstring>
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/gguf/gguf_writer.h"
#include "hearth/model/hparams.h"
#include "hearth/model/presets.h"
#include "hearth/model/synth.h"
#include "hearth/model/synth_vocab.h"
#include "hearth/model/weights.h"
#include "hearth/quant/type_traits.h"
#include "support/scratch_dir.h"

namespace hearth::model {
namespace {

std::string temp_path(const std::string& name) {
  const auto dir = hearth::testing::scratch_dir() /
                   (std::string("hearth_synth_test") + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// Every preset (scaled down to fit a test) writes a file whose hyperparameters and tensor
// table read back exactly.
TEST(Synth, EveryPresetWritesAndReadsBack) {
  for (const auto& preset : presets()) {
    HParams hp = preset.hparams;
    if (hp.dim > 256) hp = scale_hparams(hp, 256.0 / hp.dim + 1e-9);
    hp.n_layers = std::min<uint32_t>(hp.n_layers, 3);
    hp.vocab = 512;
    hp.n_experts = std::min<uint32_t>(hp.n_experts, 16);  // Qwen 3's 128 are slow to quantize
    hp.n_experts_used = std::min<uint32_t>(hp.n_experts_used, 4);
    SynthOptions opt;
    opt.hp = hp;
    opt.types = parse_type_recipe("q4_k_m");
    const auto path = temp_path(std::string(preset.name) + ".gguf");
    write_synthetic_model(opt, path);
    const auto f = gguf::GgufFile::open(path);
    const HParams got = load_hparams(f);
    EXPECT_EQ(got.arch, hp.arch) << preset.name;
    EXPECT_EQ(got.n_layers, hp.n_layers) << preset.name;
    EXPECT_EQ(got.dim, hp.dim) << preset.name;
    EXPECT_EQ(got.n_heads, hp.n_heads) << preset.name;
    EXPECT_EQ(got.n_kv_heads, hp.n_kv_heads) << preset.name;
    EXPECT_EQ(got.head_dim, hp.head_dim) << preset.name;
    EXPECT_EQ(got.vocab, hp.vocab) << preset.name;
    EXPECT_EQ(got.tied_embeddings, hp.tied_embeddings) << preset.name;
    EXPECT_EQ(got.qkv_bias, hp.qkv_bias) << preset.name;
    EXPECT_EQ(got.qk_norm, hp.qk_norm) << preset.name;
    EXPECT_FLOAT_EQ(got.rope_base, hp.rope_base) << preset.name;
    EXPECT_FLOAT_EQ(got.rms_eps, hp.rms_eps) << preset.name;
    EXPECT_EQ(got.n_experts, hp.n_experts) << preset.name;
    EXPECT_EQ(got.n_experts_used, hp.n_experts_used) << preset.name;
    // The router and three merged expert tensors take the dense block's three matrices' place.
    const size_t per_layer =
        9 + (hp.qkv_bias ? 3 : 0) + (hp.qk_norm ? 2 : 0) + (hp.is_moe() ? 1 : 0);
    EXPECT_EQ(f.tensors().size(), 2 + per_layer * hp.n_layers + (hp.tied_embeddings ? 0 : 1))
        << preset.name;
    if (hp.is_moe()) {
      EXPECT_EQ(got.ffn_expert, hp.ffn_expert) << preset.name;
      EXPECT_EQ(f.tensor("blk.0.ffn_down_exps.weight").shape,
                (std::vector<uint64_t>{hp.ffn_expert, hp.dim, hp.n_experts}));
      EXPECT_EQ(f.tensor("blk.0.ffn_gate_inp.weight").type, gguf::TensorType::kF32);
    } else {
      EXPECT_EQ(got.ffn, hp.ffn) << preset.name;
      EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").shape, (std::vector<uint64_t>{hp.ffn, hp.dim}));
    }
    EXPECT_EQ(f.tensor("blk.0.attn_k.weight").shape, (std::vector<uint64_t>{hp.dim, hp.kv_dim()}));
    std::filesystem::remove(path);
  }
}

TEST(Synth, ScaledPresetsKeepDepthAndQuantizableDims) {
  for (const auto& preset : presets()) {
    for (double s : {0.5, 0.25, 0.1}) {
      const HParams hp = scale_hparams(preset.hparams, s);
      EXPECT_EQ(hp.n_layers, preset.hparams.n_layers);
      EXPECT_EQ(hp.dim % 256, 0u) << preset.name << " x" << s;
      EXPECT_EQ(hp.ffn % 256, 0u) << preset.name << " x" << s;
      EXPECT_EQ(hp.head_dim, preset.hparams.head_dim);
      EXPECT_EQ(hp.n_heads % hp.n_kv_heads, 0u);
      EXPECT_LE(hp.dim, preset.hparams.dim);
    }
  }
}

// Q4_K_M puts Q6_K on the output and on attn_v / ffn_down of the layers llama.cpp picks.
TEST(Synth, Q4KMMixesTypesLikeLlamaCpp) {
  HParams hp = find_preset("llama3-8b").hparams;  // 32 layers
  const auto r = parse_type_recipe("q4_k_m");
  using gguf::TensorType;
  EXPECT_EQ(tensor_type_for(r, hp, "output.weight", -1), TensorType::kQ6_K);
  EXPECT_EQ(tensor_type_for(r, hp, "token_embd.weight", -1), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_for(r, hp, "blk.0.attn_v.weight", 0), TensorType::kQ6_K);  // first eighth
  EXPECT_EQ(tensor_type_for(r, hp, "blk.4.attn_v.weight", 4), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_for(r, hp, "blk.6.ffn_down.weight", 6), TensorType::kQ6_K);  // (6-4)%3==2
  EXPECT_EQ(tensor_type_for(r, hp, "blk.31.ffn_down.weight", 31),
            TensorType::kQ6_K);  // last eighth
  EXPECT_EQ(tensor_type_for(r, hp, "blk.5.attn_q.weight", 5), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_for(r, hp, "blk.5.attn_norm.weight", 5), TensorType::kF32);
  hp.tied_embeddings = true;
  EXPECT_EQ(tensor_type_for(r, hp, "token_embd.weight", -1), TensorType::kQ6_K);
  EXPECT_THROW(parse_type_recipe("q3_k_xl"), UsageError);
  // Mixtral (8 experts): attention k and v at q8_0 and its output at q5_k; every expert's
  // down projection follows ffn_down's rule; the router stays f32.
  const HParams mx = find_preset("mixtral-8x7b").hparams;
  EXPECT_EQ(tensor_type_for(r, mx, "blk.5.attn_k.weight", 5), TensorType::kQ8_0);
  EXPECT_EQ(tensor_type_for(r, mx, "blk.5.attn_v.weight", 5), TensorType::kQ8_0);
  EXPECT_EQ(tensor_type_for(r, mx, "blk.5.attn_output.weight", 5), TensorType::kQ5_K);
  EXPECT_EQ(tensor_type_for(r, mx, "blk.0.ffn_down_exps.weight", 0), TensorType::kQ6_K);
  EXPECT_EQ(tensor_type_for(r, mx, "blk.4.ffn_down.3.weight", 4), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_for(r, mx, "blk.4.ffn_gate_inp.weight", 4), TensorType::kF32);
  // Qwen 3's 128 experts keep the dense rules.
  const HParams qm = find_preset("qwen3-30b-a3b").hparams;
  EXPECT_EQ(tensor_type_for(r, qm, "blk.5.attn_k.weight", 5), TensorType::kQ4_K);
  EXPECT_EQ(tensor_type_for(r, qm, "blk.5.ffn_up_exps.weight", 5), TensorType::kQ4_K);
}

// Weights are random but bounded and centred as intended; the same seed gives the same bytes.
TEST(Synth, WeightsAreDeterministicAndScaled) {
  SynthOptions opt;
  opt.hp = find_preset("tiny-qwen2").hparams;
  opt.types = parse_type_recipe("f32");
  opt.seed = 7;
  const auto p1 = temp_path("a.gguf"), p2 = temp_path("b.gguf");
  write_synthetic_model(opt, p1);
  opt.threads = 1;
  write_synthetic_model(opt, p2);
  const auto f1 = gguf::GgufFile::open(p1), f2 = gguf::GgufFile::open(p2);
  ASSERT_EQ(f1.file_size(), f2.file_size());
  EXPECT_EQ(0, std::memcmp(f1.bytes().data(), f2.bytes().data(), f1.file_size()));
  const auto& q = f1.tensor("blk.0.attn_q.weight");
  const float* w = reinterpret_cast<const float*>(q.data);
  double sum = 0, sq = 0;
  const uint64_t n = q.elements();
  for (uint64_t i = 0; i < n; ++i) {
    sum += w[i];
    sq += double(w[i]) * w[i];
  }
  const double expected_std = 1.0 / std::sqrt(double(opt.hp.dim));
  EXPECT_NEAR(sum / n, 0.0, 0.1 * expected_std);
  EXPECT_NEAR(std::sqrt(sq / n), expected_std, 0.05 * expected_std);
}

TEST(SynthVocab, MergesBuildTokensThatExist) {
  const auto v = make_synth_vocab(Arch::kLlama, 2000, 1);
  ASSERT_EQ(v.tokens.size(), 2000u);
  std::set<std::string> tokens(v.tokens.begin(), v.tokens.end());
  EXPECT_EQ(tokens.size(), v.tokens.size()) << "duplicate token strings";
  for (const auto& m : v.merges) {
    const auto sp = m.find(' ');
    ASSERT_NE(sp, std::string::npos);
    const std::string a = m.substr(0, sp), b = m.substr(sp + 1);
    EXPECT_TRUE(tokens.count(a)) << m;
    EXPECT_TRUE(tokens.count(b)) << m;
    EXPECT_TRUE(tokens.count(a + b)) << m;
  }
  EXPECT_EQ(v.tokens[v.bos], "<|begin_of_text|>");
  EXPECT_EQ(v.tokens[v.eot], "<|eot_id|>");
  EXPECT_EQ(v.token_types[v.eos], 3);
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // U+0120
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // U+010A
  EXPECT_EQ(byte_to_unicode('a'), "a");
  EXPECT_THROW(make_synth_vocab(Arch::kLlama, 100, 1), UsageError);
}

TEST(HParams, MissingAndBadKeysAreNamed) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value::string("mamba"));
  auto bytes = w.write_memory();
  try {
    (void)load_hparams(gguf::GgufFile::parse(bytes, "m.gguf"));
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("mamba"), std::string::npos);
  }
  gguf::GgufWriter w2;
  w2.set("general.architecture", gguf::Value::string("llama"));
  w2.set("llama.block_count", gguf::Value::u32(2));
  bytes = w2.write_memory();
  try {
    (void)load_hparams(gguf::GgufFile::parse(bytes, "m.gguf"));
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("llama.embedding_length"), std::string::npos);
  }
}

// A mixture whose expert width key disagrees with its expert tensors is refused at load,
// naming the tensor, not read out of bounds.
TEST(HParams, ExpertWidthThatDisagreesWithTheTensorsIsNamed) {
  SynthOptions opt;
  opt.hp = find_preset("tiny-qwen3moe").hparams;
  opt.hp.n_layers = 1;
  opt.hp.vocab = 512;
  opt.types = parse_type_recipe("q8_0");
  const auto path = temp_path("moe_width.gguf");
  write_synthetic_model(opt, path);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  // The key's u32 value follows its name and its type tag (4 bytes each).
  const std::string key = "qwen3moe.expert_feed_forward_length";
  const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(at, bytes.end());
  uint8_t* value = &*at + key.size() + 4;
  uint32_t width = 0;
  std::memcpy(&width, value, 4);
  ASSERT_EQ(width, 256u);
  width = 512;
  std::memcpy(value, &width, 4);
  const auto f = gguf::GgufFile::parse(bytes, "moe_width.gguf");
  const HParams hp = load_hparams(f);
  EXPECT_EQ(hp.ffn_expert, 512u);
  try {
    (void)bind_weights(f, hp);
    ADD_FAILURE() << "bound";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_gate_exps.weight"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(path);
}

// Hostile sizes are refused at load with the key named, before anything is sized by them.
TEST(HParams, HostileSizesAreRefusedNamingTheKey) {
  auto file_with = [](const std::function<void(gguf::GgufWriter&)>& change) {
    gguf::GgufWriter w;
    w.set("general.architecture", gguf::Value::string("llama"));
    w.set("llama.block_count", gguf::Value::u32(2));
    w.set("llama.embedding_length", gguf::Value::u32(64));
    w.set("llama.feed_forward_length", gguf::Value::u32(128));
    w.set("llama.attention.head_count", gguf::Value::u32(4));
    w.set("llama.context_length", gguf::Value::u32(256));
    w.set("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
    auto zero = [](uint8_t* d, uint64_t n) { std::memset(d, 0, n); };
    w.add_tensor("token_embd.weight", gguf::TensorType::kF32, {64, 32}, zero);
    w.add_tensor("blk.0.attn_norm.weight", gguf::TensorType::kF32, {64}, zero);
    w.add_tensor("blk.1.attn_norm.weight", gguf::TensorType::kF32, {64}, zero);
    change(w);
    return w.write_memory();
  };
  // The unchanged file loads.
  const auto good = file_with([](gguf::GgufWriter&) {});
  EXPECT_EQ(load_hparams(gguf::GgufFile::parse(good, "m.gguf")).n_layers, 2u);
  struct Case {
    std::function<void(gguf::GgufWriter&)> change;
    std::string named;
  };
  const std::vector<Case> cases = {
      {[](auto& w) { w.set("llama.block_count", gguf::Value::u32(0xffffffffu)); },
       "llama.block_count"},
      {[](auto& w) { w.set("llama.block_count", gguf::Value::u32(3)); }, "llama.block_count"},
      {[](auto& w) { w.set("llama.embedding_length", gguf::Value::u32(0x80000000u)); },
       "llama.embedding_length"},
      {[](auto& w) {
         w.set("llama.attention.head_count", gguf::Value::u32(4096));
         w.set("llama.attention.key_length", gguf::Value::u32(4096));
       },
       "llama.attention.head_count"},
      {[](auto& w) { w.set("llama.attention.key_length", gguf::Value::u32(70000)); },
       "llama.attention.key_length"},
      {[](auto& w) { w.set("llama.attention.head_count", gguf::Value::u32(128)); }, "head_count"},
      {[](auto& w) { w.set("llama.context_length", gguf::Value::u64(1ull << 40)); },
       "llama.context_length"},
      {[](auto& w) { w.set("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(-1.0f)); },
       "layer_norm_rms_epsilon"},
      {[](auto& w) {
         w.set("llama.expert_count", gguf::Value::u32(1u << 20));
         w.set("llama.expert_used_count", gguf::Value::u32(2));
       },
       "llama.expert_count"},
      {[](auto& w) {
         w.set("llama.expert_count", gguf::Value::u32(8));
         w.set("llama.expert_used_count", gguf::Value::u32(9));
       },
       "llama.expert_used_count"},
      {[](auto& w) { w.set("llama.expert_count", gguf::Value::u32(8)); },
       "llama.expert_used_count"},
      // Experts promised, none stored.
      {[](auto& w) {
         w.set("llama.expert_count", gguf::Value::u32(8));
         w.set("llama.expert_used_count", gguf::Value::u32(2));
       },
       "ffn_gate_exps"},
  };
  for (const auto& c : cases) {
    const auto bytes = file_with(c.change);
    try {
      (void)load_hparams(gguf::GgufFile::parse(bytes, "m.gguf"));
      ADD_FAILURE() << c.named << ": loaded";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(c.named), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hearth::model
