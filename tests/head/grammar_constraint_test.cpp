// (In the model tests for the synthetic vocabulary.) A grammar constraint over a real tokenizer (a
// synthetic byte-level BPE vocabulary): sampling from masked random logits always yields text the
// grammar accepts.
#include "hearth/text/grammar_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "hearth/model/synth_vocab.h"
#include "hearth/text/json_schema.h"
#include "hearth/text/sampler.h"

namespace hearth::text {
namespace {

Tokenizer synth_tokenizer() {
  const auto sv = model::make_synth_vocab(model::Arch::kLlama, 2048, 3);
  VocabData v;
  v.model = sv.model;
  v.pre = sv.pre;
  v.tokens = sv.tokens;
  for (int32_t t : sv.token_types) v.token_types.push_back(static_cast<TokenType>(t));
  v.merges = sv.merges;
  v.bos_id = static_cast<int32_t>(sv.bos);
  v.eos_id = static_cast<int32_t>(sv.eos);
  v.eot_id = static_cast<int32_t>(sv.eot);
  return Tokenizer(std::move(v), "synth");
}

// Samples up to `max_tokens` from random logits under the grammar; the text produced.
std::string sample_text(const Tokenizer& tok, const std::string& grammar, uint64_t seed,
                        int max_tokens, bool* ended) {
  GrammarConstraint c(std::make_shared<const Grammar>(parse_grammar(grammar)), tok);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> noise(0.0f, 3.0f);
  SamplerParams sp;
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = seed;
  Sampler sampler(sp);
  std::string out;
  *ended = false;
  std::vector<float> logits(tok.n_vocab());
  for (int i = 0; i < max_tokens && !c.finished(); ++i) {
    for (auto& l : logits) l = noise(rng);
    logits[static_cast<size_t>(tok.eos())] += 4.0f;  // make ending likely once allowed
    EXPECT_GT(c.mask(logits), 0u);
    const int32_t id = sampler.sample(logits);
    EXPECT_TRUE(c.accept(id)) << id;
    if (tok.is_eog(id)) {
      *ended = true;
      break;
    }
    out += tok.token_to_bytes(id);
  }
  *ended = *ended || c.finished();
  return out;
}

TEST(GrammarConstraint, SampledTextFollowsTheGrammar) {
  const Tokenizer tok = synth_tokenizer();
  const std::string g = R"(root ::= "the " ("cat" | "dog") " is " [a-z]{1,6} ".")";
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    bool ended = false;
    const std::string text = sample_text(tok, g, seed, 64, &ended);
    ASSERT_TRUE(ended) << text;
    GrammarMatcher m(std::make_shared<const Grammar>(parse_grammar(g)));
    EXPECT_TRUE(m.accept(text) && m.complete()) << text;
  }
}

TEST(GrammarConstraint, SampledJsonParsesAndFitsTheSchema) {
  const Tokenizer tok = synth_tokenizer();
  const auto schema = nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6},
                   "n": {"type": "integer"},
                   "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 3}},
    "required": ["name", "n", "tags"]})");
  const std::string g = json_schema_to_grammar(schema);
  int parsed = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    bool ended = false;
    const std::string text = sample_text(tok, g, seed, 200, &ended);
    if (!ended) continue;  // cut by the token budget: not a whole document
    const auto j = nlohmann::json::parse(text);
    ASSERT_TRUE(j["name"].is_string()) << text;
    size_t chars = 0;  // maxLength counts characters, not bytes
    for (unsigned char c : j["name"].get<std::string>()) chars += (c & 0xc0) != 0x80;
    EXPECT_LE(chars, 6u) << text;
    EXPECT_TRUE(j["n"].is_number_integer()) << text;
    ASSERT_TRUE(j["tags"].is_array()) << text;
    EXPECT_LE(j["tags"].size(), 3u);
    for (const auto& t : j["tags"]) EXPECT_TRUE(t == "a" || t == "b") << text;
    ++parsed;
  }
  EXPECT_GE(parsed, 10);
}

}  // namespace
}  // namespace hearth::text
