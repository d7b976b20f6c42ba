// Speculative decoding on one device (model/generate.h, model/drafter.h): drafts verified
// in one batch give the ids of plain decoding when greedy, and the target's distribution
// when sampling; the KV cache ends as plain decoding leaves it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/head/drafter.h"
#include "hearth/head/generate.h"
#include "hearth/model/engine.h"
#include "hearth/text/grammar.h"
#include "hearth/text/tokenizer.h"
#include "hearth/text/vocab.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"

namespace hearth::head {
namespace {

// The engine, its options and its batches, which the tests build sources from.
using namespace model;

namespace fs = std::filesystem;

std::string model_file(const std::string& name, const testing::ModelShape& shape) {
  const fs::path dir = hearth::testing::scratch_dir() / ("hearth_spec_" + std::to_string(getpid()));
  fs::create_directories(dir);
  return testing::write_model((dir / name).string(), shape);
}

// The target (4 layers) and a draft of the same family with 2 layers, f32 and q8_0.
struct Files {
  gguf::GgufFile target, small;
  explicit Files(const char* types)
      : target(gguf::GgufFile::open(
            model_file(std::string("t-") + types + ".gguf", {4, 256, 4, 2, 512, 512, types, 7}))),
        small(gguf::GgufFile::open(
            model_file(std::string("s-") + types + ".gguf", {2, 256, 4, 2, 512, 512, types, 7}))) {}
};

Files& files(const char* types) {
  static std::map<std::string, std::unique_ptr<Files>> cache;
  auto& f = cache[types];
  if (!f) f = std::make_unique<Files>(types);
  return *f;
}

EngineOptions options(RepackMode repack) {
  EngineOptions o;
  o.threads = 2;
  o.n_ctx = 256;
  o.repack = repack;
  return o;
}

// A prompt that repeats itself, so prompt lookup finds drafts.
std::vector<int32_t> prompt_ids() {
  std::vector<int32_t> p;
  for (int rep = 0; rep < 3; ++rep)
    for (int32_t t : {17, 301, 44, 98, 250, 7, 330}) p.push_back(t);
  return p;
}

GenerateParams greedy(int n) {
  GenerateParams gp;
  gp.n_predict = n;
  gp.sampling.temperature = 0;
  gp.stop_at_eog = false;
  return gp;
}

// Every row of a batch with all_logits equals the logits of the tokens fed one at a time,
// bitwise, on both weight layouts: what makes greedy drafting give plain decoding's ids.
TEST(Speculative, AllLogitsEqualOneTokenAtATime) {
  for (const char* types : {"q8_0", "q4_k_m", "f32"}) {
    for (RepackMode repack : {RepackMode::kOff, RepackMode::kOn}) {
      Engine a(files(types).target, options(repack)), b(files(types).target, options(repack));
      const auto p = prompt_ids();
      const int64_t vocab = a.hparams().vocab;
      std::vector<float> scratch(vocab);
      a.eval(0, std::span<const int32_t>(p.data(), 10), scratch.data());
      b.eval(0, std::span<const int32_t>(p.data(), 10), scratch.data());
      const std::span<const int32_t> rest(p.data() + 10, 6);
      std::vector<float> all(rest.size() * vocab);
      EvalItem item{0, rest, all.data()};
      item.all_logits = true;
      a.eval_batch(std::span<const EvalItem>(&item, 1));
      for (size_t i = 0; i < rest.size(); ++i) {
        b.eval(0, rest.subspan(i, 1), scratch.data());
        for (int64_t v = 0; v < vocab; ++v) {
          ASSERT_EQ(all[i * vocab + v], scratch[v])
              << types << " repack " << (repack == RepackMode::kOn) << " row " << i << " id " << v;
        }
      }
    }
  }
}

struct Outcome {
  GenerateResult r;
  int64_t cache_len = 0;
  std::vector<float> next;  // logits after feeding the last id: the cache's state
};

Outcome run(Engine& engine, const text::Tokenizer& tok, GenerateParams gp) {
  engine.drop(0);
  LocalSource src(engine);
  const auto p = prompt_ids();
  Outcome o;
  o.r = generate(src, tok, p, gp);
  o.cache_len = engine.seq_length(0);
  o.next.resize(engine.hparams().vocab);
  if (!o.r.ids.empty()) engine.eval(0, std::span<const int32_t>(&o.r.ids.back(), 1), o.next.data());
  return o;
}

TEST(Speculative, GreedyIdsEqualPlainDecodingForEveryDrafter) {
  Files& f = files("q8_0");
  const text::Tokenizer tok(text::load_vocab(f.target), "target");
  Engine engine(f.target, options(RepackMode::kAuto));
  const Outcome plain = run(engine, tok, greedy(40));
  ASSERT_EQ(plain.r.ids.size(), 40u);
  EXPECT_EQ(plain.r.trips, 39);
  EXPECT_EQ(plain.r.drafted, 0);
  EXPECT_EQ(plain.cache_len, static_cast<int64_t>(prompt_ids().size() + 39));

  LookupDrafter lookup(1, 3);
  ModelDrafter self(f.target, "target", tok.vocab(), options(RepackMode::kAuto), 0.0f);
  ModelDrafter small(f.small, "small", tok.vocab(), options(RepackMode::kAuto), 0.0f);
  struct Case {
    Drafter* d;
    const char* name;
  };
  for (const Case& c : {Case{&lookup, "lookup"}, Case{&self, "self"}, Case{&small, "small"}}) {
    for (int draft_max : {1, 3, 16}) {
      GenerateParams gp = greedy(40);
      gp.drafter = c.d;
      gp.draft_max = draft_max;
      const Outcome o = run(engine, tok, gp);
      const std::string what = std::string(c.name) + " draft_max " + std::to_string(draft_max);
      EXPECT_EQ(o.r.ids, plain.r.ids) << what;
      EXPECT_EQ(o.r.stop_reason, "length") << what;
      EXPECT_EQ(o.cache_len, plain.cache_len) << what;
      EXPECT_EQ(o.next, plain.next) << what;
      EXPECT_GT(o.r.drafted, 0) << what;
      EXPECT_LE(o.r.accepted, o.r.drafted) << what;
      // Every trip gives the accepted drafts and one more token.
      EXPECT_EQ(o.r.accepted + o.r.trips, 39) << what;
      EXPECT_LE(o.r.drafted, o.r.trips * draft_max) << what;
      if (c.d == &self) {
        // The target drafting for itself: every draft passes, draft_max + 1 tokens a trip.
        EXPECT_EQ(o.r.accepted, o.r.drafted) << what;
        EXPECT_EQ(o.r.trips, (39 + draft_max) / (draft_max + 1)) << what;
      }
    }
  }
  // A drafter that seldom agrees is asked for ever fewer drafts: the 2-layer model drafts
  // far less than 16 a trip.
  GenerateParams few = greedy(40);
  few.drafter = &small;
  few.draft_max = 16;
  const Outcome fo = run(engine, tok, few);
  EXPECT_LT(fo.r.drafted, 4 * fo.r.trips);
  EXPECT_EQ(fo.r.ids, plain.r.ids);
  // The lookup drafter found drafts in the repeating prompt; some passed and some did not,
  // so both the accepting and the rolling-back paths ran above.
  GenerateParams gp = greedy(40);
  gp.drafter = &lookup;
  const Outcome o = run(engine, tok, gp);
  EXPECT_GT(o.r.drafted, o.r.accepted);
}

// Drafts the rest of a known generation: the script from the position the context reached.
class ScriptDrafter : public Drafter {
 public:
  ScriptDrafter(size_t prompt_len, std::vector<int32_t> script)
      : prompt_len_(prompt_len), script_(std::move(script)) {}
  std::vector<int32_t> draft(int64_t, std::span<const int32_t> context, int max_tokens) override {
    const size_t at = context.size() - prompt_len_;
    if (at >= script_.size()) return {};
    const size_t n = std::min<size_t>(script_.size() - at, static_cast<size_t>(max_tokens));
    return {script_.begin() + static_cast<std::ptrdiff_t>(at),
            script_.begin() + static_cast<std::ptrdiff_t>(at + n)};
  }
  const char* kind() const override { return "script"; }

 private:
  size_t prompt_len_;
  std::vector<int32_t> script_;
};

// Stops inside a verified batch leave the cache as plain decoding does: -n ending on an
// accepted draft, and end-of-generation at a draft.
TEST(Speculative, StopsInsideABatchLeaveThePlainCache) {
  Files& f = files("q8_0");
  const text::Tokenizer tok(text::load_vocab(f.target), "target");
  Engine engine(f.target, options(RepackMode::kAuto));
  ModelDrafter self(f.target, "target", tok.vocab(), options(RepackMode::kAuto), 0.0f);
  for (int n : {1, 2, 5, 7}) {
    const Outcome plain = run(engine, tok, greedy(n));
    GenerateParams gp = greedy(n);
    gp.drafter = &self;
    gp.draft_max = 4;
    const Outcome o = run(engine, tok, gp);
    EXPECT_EQ(o.r.ids, plain.r.ids) << n;
    EXPECT_EQ(o.cache_len, plain.cache_len) << n;
  }
  // A grammar whose sentence ends after a few tokens: the last one is a draft inside a
  // verified batch (the same path as an end-of-generation token there).
  GenerateParams gp = greedy(20);
  gp.grammar = std::make_shared<const text::Grammar>(
      text::parse_grammar("root ::= [a-m] [a-m] [a-m] [a-m] [a-m] [a-m] [a-m]"));
  const Outcome plain = run(engine, tok, gp);
  EXPECT_EQ(plain.r.stop_reason, "grammar");
  ASSERT_GE(plain.r.ids.size(), 3u);
  // Drafts that are the plain run's own continuation: all pass, the sentence ends inside the
  // first verified batch.
  ScriptDrafter script(prompt_ids().size(), plain.r.ids);
  gp.drafter = &script;
  gp.draft_max = 16;
  const Outcome o = run(engine, tok, gp);
  EXPECT_EQ(o.r.stop_reason, "grammar");
  EXPECT_EQ(o.r.ids, plain.r.ids);
  EXPECT_EQ(o.cache_len, plain.cache_len);
  EXPECT_EQ(o.r.trips, 1);
  EXPECT_EQ(o.r.accepted, static_cast<int64_t>(plain.r.ids.size()) - 1);
}

// With a grammar, drafts the grammar forbids are rejected like any other: the same ids.
TEST(Speculative, GrammarComposesWithDrafting) {
  Files& f = files("q8_0");
  const text::Tokenizer tok(text::load_vocab(f.target), "target");
  Engine engine(f.target, options(RepackMode::kAuto));
  ModelDrafter self(f.target, "target", tok.vocab(), options(RepackMode::kAuto), 0.0f);
  LookupDrafter lookup(1, 3);
  GenerateParams gp = greedy(24);
  gp.grammar = std::make_shared<const text::Grammar>(text::parse_grammar("root ::= [a-m ]+"));
  const Outcome plain = run(engine, tok, gp);
  ASSERT_FALSE(plain.r.ids.empty());
  for (Drafter* d : {static_cast<Drafter*>(&self), static_cast<Drafter*>(&lookup)}) {
    gp.drafter = d;
    const Outcome o = run(engine, tok, gp);
    EXPECT_EQ(o.r.ids, plain.r.ids) << d->kind();
    EXPECT_EQ(o.r.text, plain.r.text) << d->kind();
    EXPECT_EQ(o.cache_len, plain.cache_len) << d->kind();
  }
  for (char c : plain.r.text) EXPECT_TRUE((c >= 'a' && c <= 'm') || c == ' ') << plain.r.text;
}

// A drafter that always proposes the same tokens.
class FixedDrafter : public Drafter {
 public:
  explicit FixedDrafter(std::vector<int32_t> ids) : ids_(std::move(ids)) {}
  std::vector<int32_t> draft(int64_t, std::span<const int32_t>, int max_tokens) override {
    return {ids_.begin(), ids_.begin() + std::min<size_t>(ids_.size(), max_tokens)};
  }
  const char* kind() const override { return "fixed"; }

 private:
  std::vector<int32_t> ids_;
};

// Sampling with drafts follows the target's distribution: the joint distribution of the
// first three tokens over many seeds, against the exact one from the target's logits
// (chi-square at the 0.1% level).
TEST(Speculative, SamplingFollowsTheTargetsDistribution) {
  Files& f = files("q8_0");
  const text::Tokenizer tok(text::load_vocab(f.target), "target");
  // One thread: thousands of short generations, where a second thread only waits for its
  // share of small matrices (and competes with the other tests ctest runs beside this one).
  EngineOptions one_thread = options(RepackMode::kAuto);
  one_thread.threads = 1;
  Engine engine(f.target, one_thread);
  text::SamplerParams sp;
  sp.temperature = 1.5f;
  sp.top_k = 3;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  const auto p = prompt_ids();
  const int64_t vocab = engine.hparams().vocab;
  // The exact distribution: p(a) p(b | a) p(c | a b) over the top-3 candidates at each step.
  std::map<std::vector<int32_t>, double> exact;
  std::vector<float> logits(vocab);
  text::Sampler chain(sp);
  engine.drop(1);
  engine.eval(1, p, logits.data());
  const auto d1 = chain.distribution(logits);
  for (const auto& [a, pa] : d1) {
    engine.truncate(1, static_cast<int64_t>(p.size()));
    engine.eval(1, std::span<const int32_t>(&a, 1), logits.data());
    const auto d2 = chain.distribution(logits);
    for (const auto& [b, pb] : d2) {
      engine.truncate(1, static_cast<int64_t>(p.size()) + 1);
      engine.eval(1, std::span<const int32_t>(&b, 1), logits.data());
      for (const auto& [c, pc] : chain.distribution(logits)) exact[{a, b, c}] = pa * pb * pc;
    }
  }
  ASSERT_EQ(exact.size(), 27u);
  // Drafts: the likeliest second token after the likeliest first, and a token the chain
  // never keeps at the third step, so acceptance, rejection and the bonus token all occur.
  FixedDrafter drafter({d1[0].first, 511});
  std::map<std::vector<int32_t>, int> counts;
  const int n = 5000;
  int64_t drafted = 0, accepted = 0;
  for (int i = 0; i < n; ++i) {
    GenerateParams gp;
    gp.n_predict = 3;
    gp.stop_at_eog = false;
    gp.sampling = sp;
    gp.sampling.seed = 9000 + static_cast<uint64_t>(i);
    gp.drafter = &drafter;
    gp.draft_max = 2;
    gp.seq = 2;
    engine.drop(2);
    LocalSource src(engine);
    const auto r = generate(src, tok, p, gp);
    ASSERT_EQ(r.ids.size(), 3u);
    ++counts[r.ids];
    drafted += r.drafted;
    accepted += r.accepted;
  }
  double chi2 = 0;
  for (const auto& [ids, prob] : exact) {
    const double expected = prob * n;
    const double got = counts.count(ids) ? counts[ids] : 0;
    chi2 += (got - expected) * (got - expected) / expected;
    counts.erase(ids);
  }
  EXPECT_TRUE(counts.empty()) << "sequences the target's chain cannot produce";
  EXPECT_LT(chi2, 54.05);  // 99.9th percentile of chi-square with 26 degrees of freedom
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
}

TEST(Speculative, DraftModelWithAnotherVocabularyIsRefused) {
  Files& f = files("q8_0");
  const text::Tokenizer tok(text::load_vocab(f.target), "target");
  auto other = gguf::GgufFile::open(model_file("other.gguf", {2, 256, 4, 2, 512, 1024, "q8_0", 7}));
  try {
    ModelDrafter d(other, "other.gguf", tok.vocab(), options(RepackMode::kAuto), 0.8f);
    FAIL() << "a draft model with 1024 tokens was accepted for a 512-token target";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("other.gguf"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LookupDrafter(3, 2), UsageError);
  EXPECT_THROW(LookupDrafter(0, 2), UsageError);
}

TEST(Speculative, DraftLengthGrowsWhileDraftsPassAndShrinksOnARejection) {
  EXPECT_EQ(next_draft_length(4, 4, 16), 6);
  EXPECT_EQ(next_draft_length(15, 15, 16), 16);  // capped at draft_max
  EXPECT_EQ(next_draft_length(4, 2, 16), 3);     // one more than the trip kept
  EXPECT_EQ(next_draft_length(16, 0, 16), 1);    // never below one
}

TEST(Speculative, LookupDraftsTheLatestContinuation) {
  LookupDrafter d(2, 3);
  const std::vector<int32_t> ctx{1, 2, 3, 4, 9, 9, 1, 2, 3, 5, 6, 1, 2, 3};
  // The last 3-gram (1 2 3) occurred at 6 (continuing 5 6 1 ...) and at 0: the latest wins.
  EXPECT_EQ(d.draft(0, ctx, 3), (std::vector<int32_t>{5, 6, 1}));
  EXPECT_EQ(d.draft(0, ctx, 10), (std::vector<int32_t>{5, 6, 1, 2, 3}));  // up to the end
  EXPECT_TRUE(d.draft(0, std::vector<int32_t>{1, 2, 3, 4}, 4).empty());   // no repeat
  EXPECT_TRUE(d.draft(0, std::vector<int32_t>{7}, 4).empty());
  // Only a 2-gram matches: 8 4 occurred at 1.
  EXPECT_EQ(d.draft(0, std::vector<int32_t>{3, 8, 4, 6, 8, 4}, 2), (std::vector<int32_t>{6, 8}));
}

}  // namespace
}  // namespace hearth::head
