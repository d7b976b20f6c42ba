// What OpenAI clients ask for beyond text: logprobs (checked against the engine's own
// log-softmax, computed here in-process on the same file), n choices, logit_bias.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include <fmt/core.h>

#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/text/tokenizer.h"
#include "hearth/text/vocab.h"
#include "serve/serve_process.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

class OpenAiFeatures : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServeProc>(std::vector<std::string>{"--parallel", "4"});
  }
  static void TearDownTestSuite() { server_.reset(); }
  static inline std::unique_ptr<ServeProc> server_;

  static json post(const std::string& path, const json& body) {
    auto c = server_->client();
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
};

// A token's text as the server reports it: the bytes when they are whole UTF-8, else
// "bytes:\xNN..." (checked with the JSON library's strict UTF-8 validation).
std::string token_text(const text::Tokenizer& tok, int32_t id) {
  const std::string bytes = tok.token_to_bytes(id, true);
  try {
    (void)json(bytes).dump();
    return bytes;
  } catch (const json::exception&) {
    std::string out = "bytes:";
    for (unsigned char c : bytes) out += fmt::format("\\x{:02x}", c);
    return out;
  }
}

// The text a client sees for these bytes: invalid UTF-8 replaced by U+FFFD.
std::string as_sent(const std::string& bytes) {
  return json::parse(json(bytes).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

// Greedy next token ids after `prompt`, from an engine in this process on the same file.
struct Reference {
  gguf::GgufFile file = gguf::GgufFile::open(tiny_model());
  text::Tokenizer tok{text::load_vocab(file), "tiny"};
  model::Engine engine{file, [] {
                         model::EngineOptions eo;
                         eo.threads = 1;
                         eo.n_ctx = 256;
                         return eo;
                       }()};
};

// Log-softmax in double, here, from the engine's logits.
std::vector<double> log_softmax(const std::vector<float>& logits) {
  const double max_l = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max_l);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - max_l - std::log(sum);
  return out;
}

TEST_F(OpenAiFeatures, CompletionLogprobsAreTheEnginesLogSoftmax) {
  const std::vector<int32_t> prompt = {1, 20, 30, 40, 50};
  const json r = post("/v1/completions", {{"prompt", prompt},
                                          {"max_tokens", 5},
                                          {"temperature", 0},
                                          {"ignore_eos", true},
                                          {"logprobs", 3}});
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << r.dump();

  Reference ref;
  const text::Tokenizer& tok = ref.tok;
  model::Engine& engine = ref.engine;
  std::vector<float> logits(tok.n_vocab());
  engine.eval(0, prompt, logits.data());
  size_t offset = 0;
  for (size_t t = 0; t < 5; ++t) {
    const std::vector<double> ls = log_softmax(logits);
    std::vector<int32_t> order(ls.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return ls[a] > ls[b]; });
    const int32_t chosen = order[0];  // greedy
    EXPECT_EQ(lp["tokens"][t], token_text(tok, chosen)) << t;
    EXPECT_NEAR(lp["token_logprobs"][t].get<double>(), ls[chosen], 1e-4) << t;
    EXPECT_EQ(lp["text_offset"][t], offset);
    offset += tok.token_to_bytes(chosen, true).size();
    const json& top = lp["top_logprobs"][t];
    for (int k = 0; k < 3; ++k) {
      const std::string piece = token_text(tok, order[k]);
      ASSERT_TRUE(top.contains(piece)) << t << " " << top.dump();
      EXPECT_NEAR(top[piece].get<double>(), ls[order[k]], 1e-4);
    }
    engine.eval(0, std::span<const int32_t>(&chosen, 1), logits.data());
  }
}

TEST_F(OpenAiFeatures, ChatLogprobsStreamedEqualWhole) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "count"}}}},
                     {"max_tokens", 6},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const json whole = post("/v1/chat/completions", body);
  const json& content = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 6u) << whole.dump();
  std::string joined;
  for (const auto& e : content) {
    EXPECT_LE(e["logprob"].get<double>(), 0.0);
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    // Greedy: the chosen token is the most likely one.
    EXPECT_NEAR(e["top_logprobs"][0]["logprob"].get<double>(), e["logprob"].get<double>(), 1e-6);
    std::string bytes;
    for (const auto& b : e["bytes"]) bytes += static_cast<char>(b.get<int>());
    joined += bytes;
  }
  EXPECT_EQ(as_sent(joined), whole["choices"][0]["message"]["content"].get<std::string>());

  json sb = body;
  sb["stream"] = true;
  auto c = server_->client();
  auto r = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(r);
  json streamed = json::array();
  for (const auto& ev : parse_sse(r->body).events) {
    for (const auto& ch : ev["choices"]) {
      if (ch["logprobs"].is_object()) {
        for (const auto& e : ch["logprobs"]["content"]) streamed.push_back(e);
      }
    }
  }
  EXPECT_EQ(streamed, content);
}

TEST_F(OpenAiFeatures, SeveralChoices) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 5},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"n", 3}};
  const json r = post("/v1/chat/completions", body);
  ASSERT_EQ(r["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["message"]["content"], r["choices"][0]["message"]["content"]);
    EXPECT_EQ(r["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 15);
  // Sampled choices differ from one another (their seeds do), and repeat with the seed.
  json sampled = body;
  sampled["temperature"] = 1.5;
  sampled["seed"] = 5;
  sampled["max_tokens"] = 12;
  const json a = post("/v1/chat/completions", sampled);
  const json b = post("/v1/chat/completions", sampled);
  EXPECT_EQ(a["choices"], b["choices"]);
  EXPECT_NE(a["choices"][0]["message"]["content"], a["choices"][1]["message"]["content"]);
  // Streamed: every index appears, each finishes, one [DONE].
  json sb = body;
  sb["stream"] = true;
  sb["n"] = 2;
  auto c = server_->client();
  auto sr = c.Post("/v1/chat/completions", sb.dump(), "application/json");
  ASSERT_TRUE(sr);
  const SseStream s = parse_sse(sr->body);
  EXPECT_TRUE(s.done);
  std::string text[2];
  int finished = 0;
  for (const auto& ev : s.events) {
    for (const auto& ch : ev["choices"]) {
      const int i = ch["index"];
      ASSERT_TRUE(i == 0 || i == 1);
      if (ch["delta"].contains("content")) text[i] += ch["delta"]["content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) ++finished;
    }
  }
  EXPECT_EQ(finished, 2);
  EXPECT_EQ(text[0], r["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(text[1], text[0]);
}

TEST_F(OpenAiFeatures, LogitBiasBansAndForcesTokens) {
  const json base = {{"prompt", std::vector<int32_t>{1, 7, 9}},
                     {"max_tokens", 1},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"logprobs", 1}};
  Reference ref;
  std::vector<float> logits(ref.tok.n_vocab());
  ref.engine.eval(0, std::vector<int32_t>{1, 7, 9}, logits.data());
  const auto greedy =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const json plain = post("/v1/completions", base);
  EXPECT_EQ(plain["choices"][0]["logprobs"]["tokens"][0], token_text(ref.tok, greedy));
  json banned = base;
  banned["logit_bias"] = {{std::to_string(greedy), -100}};
  EXPECT_NE(post("/v1/completions", banned)["choices"][0]["logprobs"]["tokens"][0],
            token_text(ref.tok, greedy));
  auto c = server_->client();
  json forced = base;
  forced["logit_bias"] = {{"300", 100}};
  const json f = post("/v1/completions", forced);
  auto d = c.Post("/detokenize", json{{"tokens", {300}}}.dump(), "application/json");
  ASSERT_TRUE(d);
  EXPECT_EQ(f["choices"][0]["logprobs"]["tokens"][0], token_text(ref.tok, 300));
  EXPECT_EQ(f["choices"][0]["text"], json::parse(d->body)["content"]);
}

// A random schema whose every document is bounded in length (so generation must end): objects
// of up to three properties, arrays of up to three items, strings with maxLength, enums,
// consts, integers, booleans, nulls and anyOf, nested two deep.
json random_schema(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const int kind = depth >= 2 ? pick(6) : pick(9);
  switch (kind) {
    case 0:
      return {{"type", "boolean"}};
    case 1:
      return {{"type", "null"}};
    case 2:
      return {{"type", "integer"}};
    case 3: {
      const int max = pick(6);
      return {{"type", "string"}, {"minLength", pick(max + 1)}, {"maxLength", max}};
    }
    case 4:
      return {{"enum", json::array({"red", 7, nullptr, "blue green"})}};
    case 5:
      return {{"const", "fixed"}};
    case 6: {
      const int max = 1 + pick(3);
      return {{"type", "array"},
              {"items", random_schema(rng, depth + 1)},
              {"minItems", pick(max + 1)},
              {"maxItems", max}};
    }
    case 7:
      return {
          {"anyOf", json::array({random_schema(rng, depth + 1), random_schema(rng, depth + 1)})}};
    default: {
      json props = json::object(), required = json::array();
      const int n = 1 + pick(3);
      for (int i = 0; i < n; ++i) {
        const std::string name = fmt::format("p{}", i);
        props[name] = random_schema(rng, depth + 1);
        if (pick(2) == 0) required.push_back(name);
      }
      return {{"type", "object"},
              {"properties", props},
              {"required", required},
              {"additionalProperties", false}};
    }
  }
}

// Whether `v` satisfies `s` (the keywords random_schema uses), written here independently of
// the grammar that produced `v`.
bool valid(const json& s, const json& v) {
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const auto& e : s["enum"]) {
      if (e == v) return true;
    }
    return false;
  }
  if (s.contains("anyOf")) {
    for (const auto& sub : s["anyOf"]) {
      if (valid(sub, v)) return true;
    }
    return false;
  }
  const std::string t = s["type"];
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "integer") return v.is_number_integer();
  if (t == "string") {
    if (!v.is_string()) return false;
    size_t chars = 0;
    for (unsigned char c : v.get<std::string>()) chars += (c & 0xc0) != 0x80;
    return chars >= s["minLength"].get<size_t>() && chars <= s["maxLength"].get<size_t>();
  }
  if (t == "array") {
    if (!v.is_array() || v.size() < s["minItems"].get<size_t>() ||
        v.size() > s["maxItems"].get<size_t>()) {
      return false;
    }
    for (const auto& item : v) {
      if (!valid(s["items"], item)) return false;
    }
    return true;
  }
  if (!v.is_object()) return false;
  for (const auto& r : s["required"]) {
    if (!v.contains(r.get<std::string>())) return false;
  }
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!s["properties"].contains(it.key()) || !valid(s["properties"][it.key()], it.value())) {
      return false;
    }
  }
  return true;
}

TEST_F(OpenAiFeatures, AnswersFitOneHundredGeneratedSchemas) {
  std::mt19937 rng(2024);
  std::vector<json> schemas;
  for (int i = 0; i < 100; ++i) {
    json s = random_schema(rng, 1);
    if (!s.contains("type") || s["type"] != "object") {
      s = {{"type", "object"}, {"properties", {{"answer", s}}}, {"required", {"answer"}}};
    }
    schemas.push_back(std::move(s));
  }
  std::atomic<int> ok{0};
  std::vector<std::string> bad(schemas.size());
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      auto c = server_->client();
      for (size_t i = static_cast<size_t>(t); i < schemas.size(); i += 4) {
        const json body = {
            {"messages", {{{"role", "user"}, {"content", fmt::format("item {}", i)}}}},
            {"max_tokens", 1500},
            {"temperature", i % 2 ? 0.0 : 0.8},
            {"seed", i},
            {"response_format",
             {{"type", "json_schema"}, {"json_schema", {{"name", "s"}, {"schema", schemas[i]}}}}}};
        auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
        if (!r || r->status != 200) {
          bad[i] = r ? r->body : "no answer";
          continue;
        }
        const json j = json::parse(r->body);
        const std::string text = j["choices"][0]["message"]["content"];
        const json v = json::parse(text, nullptr, false);
        if (j["choices"][0]["finish_reason"] != "stop" || v.is_discarded() ||
            !valid(schemas[i], v)) {
          bad[i] = text;
          continue;
        }
        ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  for (size_t i = 0; i < schemas.size(); ++i) {
    EXPECT_TRUE(bad[i].empty()) << "schema " << schemas[i].dump() << "\nanswer " << bad[i];
  }
  EXPECT_EQ(ok.load(), 100);
}

}  // namespace
}  // namespace hearth::serve::testing
