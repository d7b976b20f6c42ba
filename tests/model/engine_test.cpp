// The engine against the independent float32 reference (reference_forward.h) on synthetic
// llama, qwen2, qwen3 and mixture-of-experts models, and batched prefill against token-by-token
// evaluation.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "hearth/base/error.h"
#include "hearth/model/engine.h"
#include "hearth/model/synth.h"
#include "hearth/quant/type_traits.h"
#include "model/reference_forward.h"
#include "support/scratch_dir.h"

namespace hearth::model {
namespace {

struct Case {
  std::string name;
  Arch arch;
  std::string type;
  uint32_t heads, kv_heads;
  bool tied = false, rope_freqs = false;
  float freq_scale = 1.0f;
  // Largest |engine - reference| over the logits, relative to the reference logits' rms.
  // f32/f16 weights: only the f16 KV cache rounds (2^-11 relative) -> 1e-2 leaves margin.
  // Quantized weights: the engine also rounds activations to 8 bits per 32-element block
  // (Q8_0/Q8_K) before each matmul: about 1.4% rms relative error per matmul (step
  // max/127, uniform rounding, max/rms ~3 for these activations), compounded over the ~5
  // matmuls of a path through 2 layers and the output (~3% rms); the maximum over 12 x 512
  // logits is ~4 sigma -> 0.15.
  double tol;
  uint32_t experts = 0, experts_used = 0;  // a mixture of experts of width 256
  ExpertLayout layout = ExpertLayout::kMerged;
};

std::string make_model(const Case& c) {
  HParams hp;
  hp.arch = c.arch;
  hp.n_layers = 2;
  hp.dim = 256;
  hp.n_heads = c.heads;
  hp.n_kv_heads = c.kv_heads;
  // qwen3 attends wider than its stream (heads x 128 > dim), as the real models do.
  hp.head_dim = c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe ? 128 : 256 / c.heads;
  hp.ffn = 512;
  hp.vocab = 512;
  hp.ctx_train = 256;
  hp.rms_eps = 1e-5f;
  hp.rope_base = 10000.0f;
  hp.qkv_bias = c.arch == Arch::kQwen2;
  hp.qk_norm = c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe;
  hp.n_experts = c.experts;
  hp.n_experts_used = c.experts_used;
  hp.ffn_expert = c.experts > 0 ? 256 : 0;
  hp.expert_layout = c.layout;
  hp.tied_embeddings = c.tied;
  hp.rope_freqs = c.rope_freqs;
  hp.rope_freq_scale = c.freq_scale;
  SynthOptions opt;
  opt.hp = hp;
  opt.types = parse_type_recipe(c.type);
  opt.seed = 42;
  const auto dir = hearth::testing::scratch_dir() /
                   (std::string("hearth_engine_test") + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / (c.name + ".gguf")).string();
  write_synthetic_model(opt, path);
  return path;
}

double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double ss = 0, mx = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ss += double(want[i]) * want[i];
    mx = std::max(mx, std::abs(double(got[i]) - want[i]));
  }
  return mx / std::sqrt(ss / want.size());
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

const std::vector<int32_t> kPrompt = {1, 17, 300, 42, 42, 7, 511, 0, 256, 99, 128, 3};

class EngineVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(EngineVsReference, LogitsMatchTokenByToken) {
  const Case& c = GetParam();
  const auto path = make_model(c);
  const auto file = gguf::GgufFile::open(path);
  Engine engine(file, EngineOptions{2, 64, {}});
  testing::ReferenceModel ref(file);
  std::vector<float> logits(engine.hparams().vocab);
  double worst = 0;
  for (int32_t tok : kPrompt) {
    engine.eval(0, std::span<const int32_t>(&tok, 1), logits.data());
    const auto want = ref.step(tok);
    worst = std::max(worst, rel_error(logits, want));
  }
  EXPECT_LT(worst, c.tol) << c.name;
  RecordProperty("worst_rel_error", std::to_string(worst));
  std::printf("[ %s ] worst logit error / rms = %.2e (tolerance %.2g)\n", c.name.c_str(), worst,
              c.tol);
}

// Batched prefill gives the same logits as feeding the prompt one token at a time, and the
// greedy continuation is the same token ids.
TEST_P(EngineVsReference, BatchedPrefillEqualsTokenByToken) {
  const Case& c = GetParam();
  const auto path = make_model(c);
  const auto file = gguf::GgufFile::open(path);
  Engine engine(file, EngineOptions{2, 64, {}});
  const int64_t vocab = engine.hparams().vocab;
  std::vector<float> a(vocab), b(vocab);
  engine.eval(1, kPrompt, a.data());
  for (int32_t tok : kPrompt) engine.eval(2, std::span<const int32_t>(&tok, 1), b.data());
  EXPECT_LT(rel_error(a, b), c.tol);
  std::vector<int> ids_a, ids_b;
  for (int step = 0; step < 8; ++step) {
    int32_t ta = argmax(a), tb = argmax(b);
    ids_a.push_back(ta);
    ids_b.push_back(tb);
    engine.eval(1, std::span<const int32_t>(&ta, 1), a.data());
    engine.eval(2, std::span<const int32_t>(&tb, 1), b.data());
  }
  EXPECT_EQ(ids_a, ids_b);
  EXPECT_EQ(engine.seq_length(1), static_cast<int64_t>(kPrompt.size() + 8));
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineVsReference,
    ::testing::Values(
        Case{"llama_f32_gqa2", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 1e-2},
        Case{"llama_f16_tied_ropefreqs", Arch::kLlama, "f16", 4, 1, true, true, 0.5f, 1e-2},
        Case{"llama_q8_0_mha", Arch::kLlama, "q8_0", 4, 4, false, false, 1.0f, 1.5e-1},
        Case{"llama_q4_k_m_gqa4", Arch::kLlama, "q4_k_m", 8, 2, false, false, 1.0f, 1.5e-1},
        Case{"llama_q4_0", Arch::kLlama, "q4_0", 4, 2, false, false, 1.0f, 1.5e-1},
        Case{"llama_q5_k", Arch::kLlama, "q5_k", 4, 2, false, false, 1.0f, 1.5e-1},
        Case{"llama_q6_k", Arch::kLlama, "q6_k", 4, 2, false, false, 1.0f, 1.5e-1},
        Case{"qwen2_f32_bias", Arch::kQwen2, "f32", 4, 2, false, false, 1.0f, 1e-2},
        Case{"qwen2_q4_k_m_tied", Arch::kQwen2, "q4_k_m", 4, 2, true, false, 1.0f, 1.5e-1},
        Case{"qwen3_f32_qknorm", Arch::kQwen3, "f32", 4, 2, false, false, 1.0f, 1e-2},
        Case{"qwen3_q4_k_m_tied", Arch::kQwen3, "q4_k_m", 4, 1, true, false, 1.0f, 1.5e-1},
        Case{"qwen3moe_f32", Arch::kQwen3Moe, "f32", 4, 2, false, false, 1.0f, 1e-2, 16, 4},
        Case{"qwen3moe_q4_k_m", Arch::kQwen3Moe, "q4_k_m", 4, 2, false, false, 1.0f, 1.5e-1, 16, 4},
        Case{"mixtral_f32", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 1e-2, 8, 2},
        Case{"mixtral_q8_0_split", Arch::kLlama, "q8_0", 4, 2, false, false, 1.0f, 1.5e-1, 8, 2,
             ExpertLayout::kSplit},
        Case{"mixtral_q4_k_m_split", Arch::kLlama, "q4_k_m", 4, 2, false, false, 1.0f, 1.5e-1, 8, 2,
             ExpertLayout::kSplit}),
    [](const auto& info) { return info.param.name; });

TEST(Engine, ContextFullAndBadTokensAreErrors) {
  const auto path = make_model(Case{"small", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  Engine engine(file, EngineOptions{1, 8, {}});
  std::vector<float> logits(engine.hparams().vocab);
  std::vector<int32_t> nine(9, 5);
  EXPECT_THROW(engine.eval(0, nine, logits.data()), UsageError);
  const int32_t bad = 512;
  EXPECT_THROW(engine.eval(0, std::span<const int32_t>(&bad, 1), logits.data()), UsageError);
  // A stage that owns only layer 1 refuses layer 0 and whole-model eval.
  Engine stage(file, EngineOptions{1, 8, {1}});
  std::vector<float> hidden(256);
  EXPECT_THROW(stage.forward_layers(0, 0, 1, hidden.data(), 0, 1), UsageError);
  EXPECT_THROW(stage.eval(0, std::span<const int32_t>(&nine[0], 1), logits.data()), UsageError);
}

// Running layers as two stages (as two ring devices would) equals one engine running all.
TEST(Engine, SplitStagesEqualWholeModel) {
  const auto path = make_model(Case{"split", Arch::kQwen2, "q8_0", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  Engine whole(file, EngineOptions{2, 32, {}});
  Engine head(file, EngineOptions{2, 32, {0}});
  Engine tail(file, EngineOptions{2, 32, {1}});
  const int64_t dim = whole.hparams().dim, vocab = whole.hparams().vocab;
  std::vector<float> want(vocab), got(vocab), hidden(kPrompt.size() * dim);
  whole.eval(0, kPrompt, want.data());
  head.embed(kPrompt, hidden.data());
  head.forward_layers(0, 0, 1, hidden.data(), 0, kPrompt.size());
  tail.forward_layers(0, 1, 2, hidden.data(), 0, kPrompt.size());
  head.logits(hidden.data() + (kPrompt.size() - 1) * dim, got.data());
  EXPECT_EQ(want, got);  // same kernels, same order: bit-identical
}

// Continuous batching: each sequence's logits are bitwise the same whether it runs alone or
// stacked with other sequences of different lengths (prefill chunks and decode rows mixed in
// one forward pass), and the greedy tokens therefore too.
struct SeqPlan {
  int64_t seq;
  std::vector<int> chunks;  // prompt chunk sizes, then greedy decode steps of one token
  int decode_steps;
  int start_step;  // batched run: the step at which this sequence joins
};

std::vector<std::vector<float>> run_alone(Engine& e, const SeqPlan& p) {
  const int64_t vocab = e.hparams().vocab;
  std::vector<std::vector<float>> out;
  size_t used = 0;
  for (int c : p.chunks) {
    out.emplace_back(vocab);
    e.eval(p.seq, std::span<const int32_t>(kPrompt.data() + used, c), out.back().data());
    used += c;
  }
  for (int d = 0; d < p.decode_steps; ++d) {
    const int32_t tok = argmax(out.back());
    out.emplace_back(vocab);
    e.eval(p.seq, std::span<const int32_t>(&tok, 1), out.back().data());
  }
  return out;
}

std::vector<std::vector<std::vector<float>>> run_batched(Engine& e,
                                                         const std::vector<SeqPlan>& plans) {
  const int64_t vocab = e.hparams().vocab;
  std::vector<std::vector<std::vector<float>>> out(plans.size());
  std::vector<size_t> used(plans.size(), 0);
  std::vector<int32_t> next(plans.size());
  for (int step = 0;; ++step) {
    std::vector<EvalItem> items;
    std::vector<size_t> who;
    for (size_t i = 0; i < plans.size(); ++i) {
      const SeqPlan& p = plans[i];
      const size_t done = out[i].size();
      if (step < p.start_step || done >= p.chunks.size() + p.decode_steps) continue;
      out[i].emplace_back(vocab);
      if (done < p.chunks.size()) {
        items.push_back({p.seq, std::span<const int32_t>(kPrompt.data() + used[i], p.chunks[done]),
                         out[i].back().data()});
        used[i] += p.chunks[done];
      } else {
        next[i] = argmax(out[i][done - 1]);
        items.push_back({p.seq, std::span<const int32_t>(&next[i], 1), out[i].back().data()});
      }
      who.push_back(i);
    }
    if (items.empty() && step > 8) break;
    if (!items.empty()) e.eval_batch(items);
  }
  return out;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class EngineBatched : public ::testing::TestWithParam<Case> {};

TEST_P(EngineBatched, SequencesAloneEqualBatchedBitwise) {
  const Case& c = GetParam();
  const auto path = make_model(c);
  const auto file = gguf::GgufFile::open(path);
  // Lengths chosen so that the stacked row count passes through 1, 4 (a four-token kernel
  // group), odd counts and groups that straddle sequences.
  const std::vector<SeqPlan> plans = {
      {7, {12}, 6, 0},       // whole prompt at once, then decode
      {3, {5, 4, 3}, 7, 0},  // chunked prefill next to the others' decode
      {11, {1}, 9, 2},       // one-token prompt, joins late
      {5, {7, 5}, 3, 4},     // joins while the others decode
  };
  Engine alone(file, EngineOptions{2, 64, {}});
  Engine batched(file, EngineOptions{2, 64, {}});
  const auto got = run_batched(batched, plans);
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto want = run_alone(alone, plans[i]);
    ASSERT_EQ(got[i].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_TRUE(bitwise_equal(got[i][k], want[k]))
          << c.name << ": sequence " << plans[i].seq << " result " << k
          << " differs between alone and batched (rel error " << rel_error(got[i][k], want[k])
          << ")";
    }
    EXPECT_EQ(batched.seq_length(plans[i].seq), alone.seq_length(plans[i].seq));
  }
}

// Paged KV (blocks of 16 positions, so every sequence crosses block edges) against one
// contiguous region per sequence: the same bits alone and batched, and blocks back in the pool
// once the sequences are dropped.
TEST_P(EngineBatched, PagedKvEqualsContiguousBitwise) {
  const Case& c = GetParam();
  const auto path = make_model(c);
  const auto file = gguf::GgufFile::open(path);
  const std::vector<SeqPlan> plans = {
      {7, {12}, 6, 0}, {3, {5, 4, 3}, 7, 0}, {11, {1}, 9, 2}, {5, {7, 5}, 3, 4}};
  EngineOptions paged_opt{2, 64, {}};
  paged_opt.kv_block = 16;
  Engine flat(file, EngineOptions{2, 64, {}});
  Engine paged(file, paged_opt);
  Engine paged_alone(file, paged_opt);
  const auto got = run_batched(paged, plans);
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto want = run_alone(flat, plans[i]);
    const auto alone = run_alone(paged_alone, plans[i]);
    ASSERT_EQ(got[i].size(), want.size());
    ASSERT_EQ(alone.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_TRUE(bitwise_equal(got[i][k], want[k]))
          << c.name << ": sequence " << plans[i].seq << " result " << k << " batched";
      EXPECT_TRUE(bitwise_equal(alone[k], want[k]))
          << c.name << ": sequence " << plans[i].seq << " result " << k << " alone";
    }
  }
  ASSERT_NE(paged.kv_pool(), nullptr);
  EXPECT_GT(paged.kv_pool()->in_use(), 0);
  for (const SeqPlan& p : plans) paged.drop(p.seq);
  EXPECT_EQ(paged.kv_pool()->in_use(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Models, EngineBatched,
    ::testing::Values(
        Case{"batch_f32", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 0},
        Case{"batch_f16_ropefreqs", Arch::kLlama, "f16", 4, 1, true, true, 0.5f, 0},
        Case{"batch_q8_0", Arch::kLlama, "q8_0", 4, 4, false, false, 1.0f, 0},
        Case{"batch_q4_k_m", Arch::kLlama, "q4_k_m", 8, 2, false, false, 1.0f, 0},
        Case{"batch_q4_0", Arch::kLlama, "q4_0", 4, 2, false, false, 1.0f, 0},
        Case{"batch_q5_k", Arch::kLlama, "q5_k", 4, 2, false, false, 1.0f, 0},
        Case{"batch_q6_k", Arch::kLlama, "q6_k", 4, 2, false, false, 1.0f, 0},
        Case{"batch_qwen2_q4_k_m", Arch::kQwen2, "q4_k_m", 4, 2, true, false, 1.0f, 0},
        Case{"batch_qwen3_q4_k_m", Arch::kQwen3, "q4_k_m", 4, 2, false, false, 1.0f, 0},
        Case{"batch_qwen3moe_q4_k_m", Arch::kQwen3Moe, "q4_k_m", 4, 2, false, false, 1.0f, 0, 16,
             4},
        Case{"batch_mixtral_q8_0_split", Arch::kLlama, "q8_0", 4, 2, false, false, 1.0f, 0, 8, 2,
             ExpertLayout::kSplit}),
    [](const auto& info) { return info.param.name; });

// Two engines on one file, one repacked: the prompt's logits and those of six greedy steps
// bit for bit (why nothing may differ: QuantizedFilesGiveTheSameBitsRepackedOrNot). Each
// step's cache holds the previous steps' K/V, so a difference anywhere shows in later steps.
void expect_same_answers(Engine& packed, Engine& plain) {
  const int64_t vocab = packed.hparams().vocab;
  std::vector<float> a(vocab), b(vocab);
  packed.eval(0, kPrompt, a.data());
  plain.eval(0, kPrompt, b.data());
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "prompt";
  for (int step = 0; step < 6; ++step) {
    const int32_t next = argmax(a);
    packed.eval(0, std::span<const int32_t>(&next, 1), a.data());
    plain.eval(0, std::span<const int32_t>(&next, 1), b.data());
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << step;
  }
}

// Two threads, a 64-token context and the given repack mode.
EngineOptions repack_options(RepackMode mode) {
  EngineOptions o{2, 64, {}};
  o.repack = mode;
  return o;
}

// Repacking into the rows16 layout (EngineOptions::repack) gives the file-layout run's logits
// bit for bit, prompt and greedy steps. Where this CPU has no rows16 kernels nothing is
// repacked (auto and on alike), which the byte counts below check.
TEST(Engine, RepackedWeightsGiveTheSameAnswers) {
  const auto path = make_model(Case{"repack", Arch::kLlama, "q8_0", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  const EngineOptions on = repack_options(RepackMode::kOn);
  Engine packed(file, on), plain(file, repack_options(RepackMode::kOff));
  EXPECT_EQ(plain.repacked_bytes(), 0u);
  const bool fast = quant::traits(gguf::TensorType::kQ8_0).rows16_fast;
  if (fast) {
    // 2 layers x (q, k, v, o: 256x256 each at GQA 2 -> q, o 256x256, k, v 128x256; gate, up
    // 512x256, down 256x512) + output 512x256, all Q8_0 (34 bytes per 32 elements).
    const uint64_t per_layer = (2 * 256 * 256 + 2 * 128 * 256 + 3 * 512 * 256) / 32 * 34;
    EXPECT_EQ(packed.repacked_bytes(), 2 * per_layer + 512 * 256 / 32 * 34);
  } else {
    EXPECT_EQ(packed.repacked_bytes(), 0u);
  }
  expect_same_answers(packed, plain);
  // f32 weights have no rows16 layout: nothing is repacked even when asked.
  const auto f32_path =
      make_model(Case{"repack_f32", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 0});
  const auto f32_file = gguf::GgufFile::open(f32_path);
  EXPECT_EQ(Engine(f32_file, on).repacked_bytes(), 0u);
  EXPECT_EQ(parse_repack_mode("auto"), RepackMode::kAuto);
  EXPECT_EQ(parse_repack_mode("off"), RepackMode::kOff);
  EXPECT_THROW(parse_repack_mode("yes"), UsageError);
}

// The GGUF-layout kernels take rows16's float steps (TypeTraits::gguf_rows16_bits), so an
// engine reading the file and one reading the repacked copy give the prompt and every greedy
// step the same logits, bit for bit (what makes devices of a ring agree whichever layout each
// reads). The prompt's matmuls on the file run through rows16 groups made on the fly.
TEST(Engine, QuantizedFilesGiveTheSameBitsRepackedOrNot) {
  for (const char* type : {"q4_k_m", "q6_k", "q8_0", "q4_0"}) {
    const auto path = make_model(
        Case{std::string("same_bits_") + type, Arch::kLlama, type, 4, 2, false, false, 1.0f, 0});
    const auto file = gguf::GgufFile::open(path);
    Engine packed(file, repack_options(RepackMode::kOn));
    Engine plain(file, repack_options(RepackMode::kOff));
    EXPECT_EQ(plain.repacked_bytes(), 0u);
    EXPECT_EQ(packed.repacked_bytes() > 0, quant::traits(gguf::TensorType::kQ4_K).rows16_fast);
    SCOPED_TRACE(type);
    expect_same_answers(packed, plain);
  }
}

// --repack auto weighs the copy against the free memory the caller passes in: less than twice
// the copy's size keeps the file layout; no figure (0) repacks as `on` does.
TEST(Engine, AutoRepackWeighsTheMemoryPassedIn) {
  if (!quant::traits(gguf::TensorType::kQ8_0).rows16_fast) {
    GTEST_SKIP() << "no rows16 kernels for Q8_0 on this CPU: nothing is ever repacked";
  }
  const auto path = make_model(Case{"repack", Arch::kLlama, "q8_0", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  const uint64_t copy = Engine(file, repack_options(RepackMode::kOn)).repacked_bytes();
  ASSERT_GT(copy, 0u);
  EngineOptions tight{2, 64, {}}, ample{2, 64, {}}, unknown{2, 64, {}};
  tight.memory_available = 2 * copy - 1;
  tight.memory_source = "test";
  ample.memory_available = 2 * copy + (1u << 20);
  EXPECT_EQ(Engine(file, tight).repacked_bytes(), 0u);
  EXPECT_EQ(Engine(file, ample).repacked_bytes(), copy);
  EXPECT_EQ(Engine(file, unknown).repacked_bytes(), copy);
}

// A mixture of experts repacks every expert's matrices (the router is f32: no rows16 layout)
// and gives the logits of the file layout bit for bit.
TEST(Engine, RepackedExpertsGiveTheSameAnswers) {
  const auto path =
      make_model(Case{"repack_moe", Arch::kQwen3Moe, "q8_0", 4, 2, false, false, 1.0f, 0, 16, 4});
  const auto file = gguf::GgufFile::open(path);
  EngineOptions on = repack_options(RepackMode::kOn), off = repack_options(RepackMode::kOff);
  on.with_output = false;  // only the layers' matrices
  Engine packed(file, on), plain(file, off);
  if (quant::traits(gguf::TensorType::kQ8_0).rows16_fast) {
    // 2 layers x (q, o: 512x256 and 256x512; k, v: 256x256; 16 experts x 3 x 256x256), Q8_0.
    const uint64_t per_layer = (2 * 512 * 256 + 2 * 256 * 256 + 16 * 3 * 256 * 256) / 32 * 34;
    EXPECT_EQ(packed.repacked_bytes(), 2 * per_layer);
  }
  expect_same_answers(packed, plain);
}

// A refused batch (a sequence twice, context full for one member, a bad token in one member)
// changes no sequence's cache.
// n token ids of the 512-token test vocabulary, spread over it.
std::vector<int32_t> long_prompt(int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 37 + 5) % 512;
  return ids;
}

// A sequence that shares another's prompt prefix computes only the rest and reads the same
// logits as one computed from scratch, while the other goes on undisturbed; the prefix's blocks
// are stored once.
TEST(Engine, SharedPromptPrefixGivesTheSameLogits) {
  const auto path = make_model(Case{"share", Arch::kLlama, "q4_k_m", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  EngineOptions opt{2, 64, {}};
  opt.kv_block = 16;
  Engine paged(file, opt);
  Engine flat(file, EngineOptions{2, 64, {}});
  const int64_t vocab = paged.hparams().vocab;
  const auto tokens = long_prompt(40);
  const std::span<const int32_t> prompt(tokens);
  std::vector<float> a(vocab), b(vocab), want(vocab);
  paged.eval(1, prompt, a.data());
  const int64_t blocks = paged.kv_pool()->in_use();
  EXPECT_EQ(blocks, 3);
  paged.share_prefix(1, 2, 36);
  EXPECT_EQ(paged.seq_length(2), 36);
  EXPECT_EQ(paged.kv_pool()->in_use(), blocks);
  EXPECT_EQ(paged.kv_blocks_needed(2, 4), 1);  // the shared last block is copied first
  paged.eval(2, prompt.subspan(36), b.data());
  flat.eval(2, prompt, want.data());
  EXPECT_TRUE(bitwise_equal(b, want));
  EXPECT_EQ(paged.kv_pool()->in_use(), blocks + 1);
  // Both go on decoding: each equals its contiguous twin.
  flat.eval(1, prompt, want.data());
  for (int step = 0; step < 4; ++step) {
    const int32_t ta = argmax(a), tb = argmax(b) == 0 ? 1 : 0;  // different continuations
    std::vector<float> wa(vocab), wb(vocab);
    paged.eval(1, std::span<const int32_t>(&ta, 1), a.data());
    paged.eval(2, std::span<const int32_t>(&tb, 1), b.data());
    flat.eval(1, std::span<const int32_t>(&ta, 1), wa.data());
    flat.eval(2, std::span<const int32_t>(&tb, 1), wb.data());
    EXPECT_TRUE(bitwise_equal(a, wa)) << "step " << step;
    EXPECT_TRUE(bitwise_equal(b, wb)) << "step " << step;
  }
  EXPECT_THROW(flat.share_prefix(1, 3, 4), UsageError);     // not paged
  EXPECT_THROW(paged.share_prefix(9, 3, 4), UsageError);    // no sequence 9
  EXPECT_THROW(paged.share_prefix(1, 3, 100), UsageError);  // more than it holds
}

// A paged engine whose pool cannot hold a batch refuses all of it before any cache changes.
TEST(Engine, FullKvPoolRefusesTheWholeBatch) {
  const auto path = make_model(Case{"pool", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  EngineOptions opt{1, 64, {}};
  opt.kv_block = 16;
  opt.kv_pool = 40;  // three blocks
  Engine engine(file, opt);
  std::vector<float> la(engine.hparams().vocab), lb(engine.hparams().vocab);
  const auto tokens = long_prompt(20);
  const std::span<const int32_t> twenty(tokens), ten(tokens.data(), 10);
  engine.eval(1, twenty, la.data());
  EXPECT_EQ(engine.kv_pool()->available(), 1);
  // Sequence 1 crosses into a third block (positions 20..29 stay in its second: ten more
  // would fit) and sequence 2 needs its first: two blocks, one free.
  const std::span<const int32_t> fifteen(tokens.data(), 15);
  const std::vector<EvalItem> both = {{1, fifteen, la.data()}, {2, ten, lb.data()}};
  EXPECT_THROW(engine.eval_batch(both), compute::KvPoolFull);
  EXPECT_EQ(engine.seq_length(1), 20);
  EXPECT_EQ(engine.seq_length(2), 0);
  EXPECT_EQ(engine.kv_pool()->available(), 1);
  engine.eval(2, ten, lb.data());
  EXPECT_EQ(engine.kv_pool()->available(), 0);
}

TEST(Engine, RefusedBatchChangesNothing) {
  const auto path = make_model(Case{"refuse", Arch::kLlama, "f32", 4, 2, false, false, 1.0f, 0});
  const auto file = gguf::GgufFile::open(path);
  Engine engine(file, EngineOptions{1, 8, {}});
  std::vector<float> la(engine.hparams().vocab), lb(engine.hparams().vocab);
  const std::vector<int32_t> three = {1, 2, 3}, six = {1, 2, 3, 4, 5, 6}, bad = {4, 512};
  engine.eval(1, three, la.data());
  const std::vector<EvalItem> twice = {{1, three, la.data()}, {1, three, lb.data()}};
  EXPECT_THROW(engine.eval_batch(twice), UsageError);
  const std::vector<EvalItem> full = {{2, three, la.data()}, {1, six, lb.data()}};
  EXPECT_THROW(engine.eval_batch(full), UsageError);
  const std::vector<EvalItem> bad_id = {{2, three, la.data()}, {1, bad, lb.data()}};
  EXPECT_THROW(engine.eval_batch(bad_id), UsageError);
  const std::vector<EvalItem> empty = {{2, three, la.data()}, {1, {}, lb.data()}};
  EXPECT_THROW(engine.eval_batch(empty), UsageError);
  EXPECT_EQ(engine.seq_length(1), 3);
  EXPECT_EQ(engine.seq_length(2), 0);
  // A stage refuses a batch whose cache lengths disagree with the positions.
  Engine stage(file, EngineOptions{1, 8, {1}});
  std::vector<float> hidden(2 * 256);
  const std::vector<BatchSegment> segs = {{1, 0, 1}, {2, 3, 1}};
  EXPECT_THROW(stage.forward_batch(segs, 1, 2, hidden.data()), UsageError);
  EXPECT_EQ(stage.seq_length(1), 0);
}

}  // namespace
}  // namespace hearth::model
