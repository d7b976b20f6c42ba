// Perplexity: model::perplexity() against a direct computation from logits (the engine token by
// token, and the float64 reference), and `hearth perplexity` as a user runs it, with its
// KL-divergence reference file.
#include "hearth/model/perplexity.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/presets.h"
#include "hearth/model/synth.h"
#include "reference_forward.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"

namespace hearth::model {
namespace {

namespace fs = std::filesystem;

fs::path dir() {
  const auto d = hearth::testing::scratch_dir() / ("hearth_ppl_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

std::string make_model(const std::string& type) {
  const std::string path = (dir() / ("ppl-" + type + ".gguf")).string();
  if (fs::exists(path)) return path;
  SynthOptions opt;
  opt.hp = find_preset("tiny-llama").hparams;
  opt.hp.n_layers = 2;
  opt.hp.vocab = 512;
  opt.types = parse_type_recipe(type);
  opt.seed = 11;
  write_synthetic_model(opt, path);
  return path;
}

std::vector<int32_t> random_tokens(size_t n, int32_t vocab) {
  std::mt19937 rng(5);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// The same sum of -log p(token) computed two other ways: the engine one token at a time (its
// logits for the last token), and the float64 reference of tests/model/reference_forward.h.
TEST(Perplexity, EqualsADirectComputationFromTheLogits) {
  const auto path = make_model("f32");
  const auto file = gguf::GgufFile::open(path);
  EngineOptions eo;
  eo.n_ctx = 64;
  eo.threads = 2;
  Engine engine(file, eo);
  const int32_t vocab = static_cast<int32_t>(engine.hparams().vocab);
  const auto tokens = random_tokens(150, vocab);  // 4 whole chunks of 32, and a rest
  PerplexityOptions po;
  po.n_ctx = 32;
  po.bos = 1;
  std::vector<double> hearth_lp;
  const auto r = perplexity(engine, tokens, po, 3,
                            [&](int64_t, int64_t, int32_t token, std::span<const float> lp) {
                              hearth_lp.push_back(lp[static_cast<size_t>(token)]);
                            });
  ASSERT_EQ(r.chunks, 4);
  ASSERT_EQ(r.scored, 4 * (32 - 1 - 16));
  ASSERT_EQ(hearth_lp.size(), static_cast<size_t>(r.scored));

  double direct = 0, reference = 0, worst = 0;
  size_t k = 0;
  std::vector<float> logits(static_cast<size_t>(vocab)), lp(static_cast<size_t>(vocab));
  for (int64_t c = 0; c < 4; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * 32, tokens.begin() + (c + 1) * 32);
    chunk[0] = 1;
    testing::ReferenceModel ref(file);
    engine.drop(9);
    for (int64_t j = 0; j < 31; ++j) {
      engine.eval(9, {&chunk[static_cast<size_t>(j)], 1}, logits.data());
      const auto ref_logits = ref.step(chunk[static_cast<size_t>(j)]);
      if (j < 16) continue;
      const int32_t next = chunk[static_cast<size_t>(j + 1)];
      log_softmax(logits, lp);
      direct += -lp[static_cast<size_t>(next)];
      // Reference: log-softmax in double of the reference's logits.
      double mx = -INFINITY, sum = 0;
      for (float v : ref_logits) mx = std::max(mx, double(v));
      for (float v : ref_logits) sum += std::exp(double(v) - mx);
      const double ref_lp = double(ref_logits[static_cast<size_t>(next)]) - mx - std::log(sum);
      reference += -ref_lp;
      worst = std::max(worst, std::abs(ref_lp - hearth_lp[k]));
      EXPECT_NEAR(lp[static_cast<size_t>(next)], hearth_lp[k], 1e-4) << "chunk " << c << " j " << j;
      ++k;
    }
  }
  EXPECT_NEAR(r.nll_sum, direct, 1e-4 * direct);
  // hearth keeps K and V in f16 (the reference in f32): log-probabilities within 2e-2.
  EXPECT_LT(worst, 2e-2);
  EXPECT_NEAR(r.nll_sum, reference, 2e-3 * reference);
  EXPECT_NEAR(r.ppl(), std::exp(direct / static_cast<double>(r.scored)), 1e-3 * r.ppl());
  EXPECT_GT(r.ppl_error(), 0.0);
  std::printf("perplexity %.4f; worst |log p| gap to the float64 reference %.2e\n", r.ppl(), worst);
}

// With f32 weights and an f32 KV cache nothing is rounded to 16 bits anywhere: every logit
// of every position agrees with the float64 reference within 1e-4 x the largest |logit|.
TEST(Perplexity, F32WeightsAndF32CacheMatchTheFloat64Reference) {
  const auto file = gguf::GgufFile::open(make_model("f32"));
  EngineOptions eo;
  eo.n_ctx = 64;
  eo.threads = 2;
  eo.kv_types = {compute::KvType::kF32, compute::KvType::kF32};
  Engine engine(file, eo);
  const int32_t vocab = static_cast<int32_t>(engine.hparams().vocab);
  const auto tokens = random_tokens(48, vocab);
  testing::ReferenceModel ref(file);
  std::vector<float> logits(static_cast<size_t>(vocab));
  double worst_ratio = 0;
  for (int32_t t : tokens) {
    engine.eval(0, {&t, 1}, logits.data());
    const auto want = ref.step(t);
    double max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(double(want[i])));
      max_diff = std::max(max_diff, std::abs(double(want[i]) - logits[i]));
    }
    worst_ratio = std::max(worst_ratio, max_diff / max_abs);
  }
  EXPECT_LT(worst_ratio, 1e-4);
  std::printf("worst |logit - reference| / max |logit| = %.2e\n", worst_ratio);
}

TEST(Perplexity, TooShortATextIsAUsageError) {
  const auto file = gguf::GgufFile::open(make_model("f32"));
  EngineOptions eo;
  eo.n_ctx = 64;
  Engine engine(file, eo);
  PerplexityOptions po;
  po.n_ctx = 32;
  EXPECT_THROW(perplexity(engine, random_tokens(20, 500), po), UsageError);
  po.n_ctx = 128;  // more than the engine holds
  EXPECT_THROW(perplexity(engine, random_tokens(300, 500), po), UsageError);
}

std::string text_file() {
  const auto p = (dir() / "text.txt").string();
  std::ofstream out(p);
  std::mt19937 rng(3);
  const char* words[] = {"the", "house", "and", "fire", "of", "seven", "owls", "at", "night"};
  for (int i = 0; i < 900; ++i) out << words[rng() % 9] << ' ';
  return p;
}

// As a user runs it: the JSON agrees with itself, a reference run of the same model has zero
// divergence, another weight type a small positive one, and a reference that does not match
// the run (chunk size, a damaged file) is refused naming the file.
TEST(PerplexityCli, ReferenceRunsAndKlDivergence) {
  const std::string f32 = make_model("f32"), q4 = make_model("q4_k_m");
  const std::string text = text_file(), base = (dir() / "ref.kl").string();
  const std::string common = " -f " + text + " -c 64 -t 2 --json";
  auto a = testing::run_hearth("perplexity -m " + f32 + common + " --kl-divergence-base " + base);
  ASSERT_EQ(a.exit_code, 0) << a.all();
  const auto ja = testing::last_json_line(a.out);
  EXPECT_GE(ja["chunks"].get<int>(), 4);
  EXPECT_NEAR(ja["ppl"].get<double>(),
              std::exp(ja["nll_sum"].get<double>() / ja["scored"].get<double>()), 1e-6);
  EXPECT_NE(a.out.find("Final estimate: PPL = "), std::string::npos) << a.out;

  auto same = testing::run_hearth("perplexity -m " + f32 + common + " --kl-divergence-base " +
                                  base + " --kl-divergence");
  ASSERT_EQ(same.exit_code, 0) << same.all();
  const auto js = testing::last_json_line(same.out);
  EXPECT_NEAR(js["kl_mean"].get<double>(), 0.0, 1e-9);
  EXPECT_EQ(js["same_top_fraction"].get<double>(), 1.0);
  EXPECT_NEAR(js["base_ppl"].get<double>(), ja["ppl"].get<double>(),
              1e-6 * ja["ppl"].get<double>());

  auto other = testing::run_hearth("perplexity -m " + q4 + common + " --kl-divergence-base " +
                                   base + " --kl-divergence");
  ASSERT_EQ(other.exit_code, 0) << other.all();
  const auto jo = testing::last_json_line(other.out);
  EXPECT_GT(jo["kl_mean"].get<double>(), 0.0);
  EXPECT_LT(jo["kl_mean"].get<double>(), 1.0);
  EXPECT_LT(jo["same_top_fraction"].get<double>(), 1.0);

  auto wrong_c = testing::run_hearth("perplexity -m " + f32 + " -f " + text +
                                     " -c 32 --kl-divergence-base " + base + " --kl-divergence");
  EXPECT_EQ(wrong_c.exit_code, 2) << wrong_c.all();
  EXPECT_NE(wrong_c.err.find("chunk size"), std::string::npos) << wrong_c.err;
  fs::resize_file(base, fs::file_size(base) / 2);
  auto cut = testing::run_hearth("perplexity -m " + f32 + common + " --kl-divergence-base " + base +
                                 " --kl-divergence");
  EXPECT_EQ(cut.exit_code, 2) << cut.all();
  EXPECT_NE(cut.err.find(base), std::string::npos) << cut.err;
  std::ofstream(base) << "not a reference";
  auto junk = testing::run_hearth("perplexity -m " + f32 + common + " --kl-divergence-base " +
                                  base + " --kl-divergence");
  EXPECT_EQ(junk.exit_code, 2) << junk.all();
  auto no_text = testing::run_hearth("perplexity -m " + f32 + " -f /nonexistent -c 64");
  EXPECT_EQ(no_text.exit_code, 2) << no_text.all();
}

}  // namespace
}  // namespace hearth::model
