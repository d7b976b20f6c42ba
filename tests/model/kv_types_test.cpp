// KV cache types end to end: what q8_0 / q4_0 / f32 caches do to a model's next-token
// distributions against the default f16 cache, and the flags a user types.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/model/perplexity.h"
#include "hearth/model/presets.h"
#include "hearth/model/synth.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"

namespace hearth::model {
namespace {

namespace fs = std::filesystem;
using compute::KvType;

std::string make_model(const std::string& name, const HParams& hp) {
  const auto d = hearth::testing::scratch_dir() / ("hearth_kvtypes_" + std::to_string(getpid()));
  fs::create_directories(d);
  const std::string path = (d / name).string();
  if (fs::exists(path)) return path;
  SynthOptions opt;
  opt.hp = hp;
  opt.types = parse_type_recipe("f32");
  opt.seed = 23;
  write_synthetic_model(opt, path);
  return path;
}

// Log-probabilities after each of `tokens` (n, vocab), fed one at a time from an empty cache.
std::vector<std::vector<float>> next_token_log_probs(const gguf::GgufFile& file,
                                                     compute::KvTypes types,
                                                     const std::vector<int32_t>& tokens) {
  EngineOptions eo;
  eo.threads = 2;
  eo.n_ctx = static_cast<int64_t>(tokens.size());
  eo.kv_types = types;
  Engine engine(file, eo);
  const size_t vocab = engine.hparams().vocab;
  std::vector<float> logits(vocab);
  std::vector<std::vector<float>> out;
  for (int32_t t : tokens) {
    engine.eval(0, std::span<const int32_t>(&t, 1), logits.data());
    out.emplace_back(vocab);
    log_softmax(logits, out.back());
  }
  return out;
}

// Mean over positions of KL(p || q) in nats.
double mean_kl(const std::vector<std::vector<float>>& p, const std::vector<std::vector<float>>& q) {
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    for (size_t j = 0; j < p[i].size(); ++j)
      sum += std::exp(static_cast<double>(p[i][j])) * (p[i][j] - q[i][j]);
  }
  return sum / static_cast<double>(p.size());
}

// Stated bounds on a 4-layer f32 model over 200 positions (llama shape, head_dim 64, GQA 2),
// against the f16 cache: a q8_0 cache within a mean KL of 2e-4 nats, a q4_0 cache within
// 5e-2. The error grows as the type coarsens (f32 < q8_0 < q4_0), and every type changes the
// result (a type that silently stayed f16 would give 0).
TEST(KvTypes, DivergenceFromF16GrowsWithTheTypesCoarseness) {
  HParams hp = find_preset("tiny-llama").hparams;
  hp.vocab = 1024;
  const std::string path = make_model("kl.gguf", hp);
  const auto file = gguf::GgufFile::open(path);
  std::mt19937 rng(8);
  std::vector<int32_t> tokens(200);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % hp.vocab);

  const auto f16 = next_token_log_probs(file, {}, tokens);
  double kl[4] = {};
  for (KvType t : {KvType::kF32, KvType::kQ8_0, KvType::kQ4_0}) {
    kl[static_cast<int>(t)] = mean_kl(f16, next_token_log_probs(file, {t, t}, tokens));
    std::printf("KL(f16 || %s) = %.3g nats\n", compute::kv_type_name(t), kl[static_cast<int>(t)]);
  }
  const double kl_f32 = kl[0], kl_q8 = kl[2], kl_q4 = kl[3];
  EXPECT_GT(kl_f32, 0.0);
  EXPECT_LT(kl_f32, kl_q8);
  EXPECT_LT(kl_q8, kl_q4);
  EXPECT_LT(kl_q8, 2e-4);
  EXPECT_LT(kl_q4, 5e-2);
  // K and V each matter: quantizing only one of them is between f16 and both.
  const double kl_k_only =
      mean_kl(f16, next_token_log_probs(file, {KvType::kQ4_0, KvType::kF16}, tokens));
  EXPECT_GT(kl_k_only, 0.0);
  EXPECT_LT(kl_k_only, kl_q4);
}

// The model's heads must hold whole q8_0 blocks: a head_dim of 48 is refused when the engine
// is made, naming the type and the head size.
TEST(KvTypes, BlockTypesNeedWholeBlocksPerHead) {
  HParams hp = find_preset("tiny-llama").hparams;
  hp.n_heads = 4;
  hp.n_kv_heads = 2;
  hp.dim = 192;
  hp.head_dim = 48;
  hp.vocab = 512;
  const auto file = gguf::GgufFile::open(make_model("hd48.gguf", hp));
  EngineOptions eo;
  eo.n_ctx = 16;
  eo.kv_types = {KvType::kF16, KvType::kQ8_0};
  try {
    Engine engine(file, eo);
    FAIL() << "q8_0 V accepted with head_dim 48";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("q8_0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("48"), std::string::npos) << e.what();
  }
  eo.kv_types = {KvType::kF32, KvType::kF16};
  EXPECT_NO_THROW(Engine(file, eo));
}

TEST(KvTypesCli, FlagsAsLlamaCppSpellsThem) {
  HParams hp = find_preset("tiny-llama").hparams;
  hp.vocab = 512;
  const std::string path = make_model("cli.gguf", hp);
  const std::string run = "run -m " + path + " -p 'a b c' -n 6 --temp 0 -t 1 -c 64 --json";
  const auto f16 = testing::run_hearth(run);
  ASSERT_EQ(f16.exit_code, 0) << f16.all();
  const auto q8 = testing::run_hearth(run + " -ctk q8_0 -ctv q8_0");
  ASSERT_EQ(q8.exit_code, 0) << q8.all();
  const auto q8_long = testing::run_hearth(run + " --cache-type-k q8_0 --cache-type-v Q8_0");
  ASSERT_EQ(q8_long.exit_code, 0) << q8_long.all();
  EXPECT_EQ(testing::last_json_line(q8.out)["ids"], testing::last_json_line(q8_long.out)["ids"]);

  const auto bad = testing::run_hearth(run + " -ctk q5_1");
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_NE(bad.err.find("--cache-type-k"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("q5_1"), std::string::npos) << bad.err;
  const auto plan_bad = testing::run_hearth("perplexity -m " + path + " -f /dev/null -ctv f8");
  EXPECT_EQ(plan_bad.exit_code, 2) << plan_bad.all();
  EXPECT_NE(plan_bad.err.find("--cache-type-v"), std::string::npos) << plan_bad.err;
}

}  // namespace
}  // namespace hearth::model
