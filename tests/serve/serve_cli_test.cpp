// `hearth serve` end to end: a real server process on a free local port and HTTP clients.
// Greedy outputs are compared between a request alone and the same request among others.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include "serve/serve_process.h"
#include "support/synth_model.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

// Waits until `pred` holds, at most `seconds`.
template <typename F>
bool eventually(F pred, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ =
        std::make_unique<ServeProc>(std::vector<std::string>{"--parallel", "4", "-c", "4096"});
  }
  static void TearDownTestSuite() { server_.reset(); }
  static inline std::unique_ptr<ServeProc> server_;

  static json post_ok(const std::string& path, const json& body) {
    auto c = server_->client();
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  // Status and error object of a request expected to fail.
  static std::pair<int, json> post_err(const std::string& path, const std::string& body) {
    auto c = server_->client();
    auto r = c.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {0, {}};
    auto j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error")) << r->body;
    if (j.is_object() && j.contains("error")) {
      for (const char* k : {"message", "type", "param", "code"}) {
        EXPECT_TRUE(j["error"].contains(k)) << k << " missing in " << r->body;
      }
      EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    }
    return {r->status, j.is_object() ? j["error"] : json()};
  }
  static SseStream stream(const std::string& path, json body) {
    body["stream"] = true;
    auto c = server_->client();
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200);
    EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
    return parse_sse(r->body);
  }
  static void concurrent_greedy_streams_equal_single_requests();
  static json chat(const std::string& user, int max_tokens) {
    return {
        {"messages",
         {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", user}}}},
        {"max_tokens", max_tokens},
        {"temperature", 0},
        {"ignore_eos", true}};
  }
  static double metric(const std::string& name) { return server_->metric(name); }
};

TEST(ServeWarnings, AnyAddressWithoutAKeyIsWarnedAbout) {
  {
    ServeProc open_server({"--host", "0.0.0.0"});
    open_server.terminate();
    std::ifstream log(open_server.log());
    const std::string text((std::istreambuf_iterator<char>(log)), {});
    EXPECT_NE(text.find("without --api-key"), std::string::npos) << text;
  }
  ServeProc keyed({"--host", "0.0.0.0", "--api-key", "k"});
  keyed.terminate();
  std::ifstream log(keyed.log());
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_EQ(text.find("without --api-key"), std::string::npos) << text;
}

TEST_F(ServeTest, BindsLoopbackByDefault) {
  EXPECT_NE(server_->first_line().find("http://127.0.0.1:"), std::string::npos)
      << server_->first_line();
}

TEST_F(ServeTest, ModelsHealthAndMetrics) {
  auto c = server_->client();
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body)["status"], "ok");
  auto m = c.Get("/v1/models");
  ASSERT_TRUE(m);
  const json mj = json::parse(m->body);
  EXPECT_EQ(mj["object"], "list");
  ASSERT_EQ(mj["data"].size(), 1u);
  EXPECT_EQ(mj["data"][0]["id"], "serve_tiny");
  EXPECT_EQ(mj["data"][0]["meta"]["n_ctx"], 4096);

  const double before = metric("hearth_tokens_generated_total");
  post_ok("/v1/chat/completions", chat("count", 6));
  EXPECT_EQ(metric("hearth_tokens_generated_total"), before + 6);
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  for (const char* name : {"hearth_ttft_seconds_bucket{le=\"+Inf\"}", "hearth_tpot_seconds_count",
                           "hearth_queue_depth", "hearth_active_sequences"}) {
    EXPECT_NE(r->body.find(name), std::string::npos) << name;
  }
  EXPECT_GE(metric("hearth_ttft_seconds_count"), 1);
}

TEST_F(ServeTest, ChatCompletionShapeAndUsage) {
  const json r = post_ok("/v1/chat/completions", chat("hello there", 8));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["model"], "serve_tiny");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  ASSERT_EQ(r["choices"].size(), 1u);
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["completion_tokens"], 8);
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), 4);
  EXPECT_EQ(r["usage"]["total_tokens"].get<int>(), r["usage"]["prompt_tokens"].get<int>() + 8);
}

TEST_F(ServeTest, StreamingEqualsNonStreamingAndEndsWithDone) {
  json body = chat("tell me a story", 10);
  const json whole = post_ok("/v1/chat/completions", body);
  body["stream_options"] = {{"include_usage", true}};
  const SseStream s = stream("/v1/chat/completions", body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, whole["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(s.finish_reason, "length");
  ASSERT_TRUE(s.usage.is_object());
  EXPECT_EQ(s.usage["completion_tokens"], 10);
  EXPECT_EQ(s.usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(s.events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(s.events.back()["choices"].empty());  // the usage chunk comes last
  // Without include_usage there is no usage chunk.
  body.erase("stream_options");
  EXPECT_TRUE(stream("/v1/chat/completions", body).usage.is_null());
}

TEST_F(ServeTest, CompletionsPlainAndStreamed) {
  const json body = {
      {"prompt", "once upon a time"}, {"max_tokens", 7}, {"temperature", 0}, {"ignore_eos", true}};
  const json r = post_ok("/v1/completions", body);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["usage"]["completion_tokens"], 7);
  const SseStream s = stream("/v1/completions", body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.text, r["choices"][0]["text"].get<std::string>());
  // A prompt given as token ids is the same prompt.
  const json tok = post_ok("/tokenize", {{"content", "once upon a time"}, {"add_special", true}});
  json by_ids = body;
  by_ids["prompt"] = tok["tokens"];
  EXPECT_EQ(post_ok("/v1/completions", by_ids)["choices"][0]["text"], r["choices"][0]["text"]);
}

TEST_F(ServeTest, SeededSamplingRepeats) {
  json body = chat("random please", 12);
  body["temperature"] = 1.5;
  body["seed"] = 1234;
  const auto a = post_ok("/v1/chat/completions", body)["choices"][0]["message"]["content"];
  const auto b = post_ok("/v1/chat/completions", body)["choices"][0]["message"]["content"];
  EXPECT_EQ(a, b);
}

TEST_F(ServeTest, StopStringsEndTheReply) {
  const std::string full = post_ok("/v1/completions", {{"prompt", "abc"},
                                                       {"max_tokens", 16},
                                                       {"temperature", 0},
                                                       {"ignore_eos", true}})["choices"][0]["text"];
  // Two printable ASCII bytes from the middle of the reply (the model emits any bytes).
  size_t at = 2;
  auto printable = [](char ch) { return ch > 0x20 && ch < 0x7f; };
  while (at + 1 < full.size() && !(printable(full[at]) && printable(full[at + 1]))) ++at;
  ASSERT_LT(at + 1, full.size()) << full;
  const std::string stop = full.substr(at, 2);
  for (const json& s : {json(stop), json::array({"\x01\x02never", stop})}) {
    const json r = post_ok("/v1/completions", {{"prompt", "abc"},
                                               {"max_tokens", 16},
                                               {"temperature", 0},
                                               {"ignore_eos", true},
                                               {"stop", s}});
    EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    const SseStream st = stream("/v1/completions", {{"prompt", "abc"},
                                                    {"max_tokens", 16},
                                                    {"temperature", 0},
                                                    {"ignore_eos", true},
                                                    {"stop", s}});
    EXPECT_EQ(st.text, full.substr(0, full.find(stop)));
  }
}

TEST_F(ServeTest, TokenizeDetokenizeRoundTrip) {
  const json t = post_ok("/tokenize", {{"content", "hello world"}});
  ASSERT_TRUE(t["tokens"].is_array());
  ASSERT_FALSE(t["tokens"].empty());
  EXPECT_EQ(post_ok("/detokenize", {{"tokens", t["tokens"]}})["content"], "hello world");
}

// N concurrent streaming clients: every stream completes and equals the request alone.
TEST_F(ServeTest, ConcurrentGreedyStreamsEqualSingleRequests) {
  concurrent_greedy_streams_equal_single_requests();
}

// The same server on a mixture of experts (qwen3moe): batched rows are routed to their own
// experts and each request's answer is the one it gets alone.
class ServeMoe : public ServeTest {
 protected:
  static void SetUpTestSuite() {
    const std::string path =
        hearth::testing::write_moe_model((test_dir() / "serve_moe.gguf").string(), 2, "q8_0", 13);
    server_ = std::make_unique<ServeProc>(std::vector<std::string>{"--parallel", "4", "-c", "4096"},
                                          path);
  }
};

TEST_F(ServeMoe, ConcurrentGreedyStreamsEqualSingleRequests) {
  concurrent_greedy_streams_equal_single_requests();
}

void ServeTest::concurrent_greedy_streams_equal_single_requests() {
  constexpr int kClients = 6;  // with the anchor, more than --parallel 4: three wait in the queue
  std::vector<json> bodies;
  std::vector<std::string> alone;
  for (int i = 0; i < kClients; ++i) {
    bodies.push_back(
        chat("question number " + std::to_string(i) + std::string(i * 7, 'x'), 12 + i));
    alone.push_back(
        post_ok("/v1/chat/completions", bodies.back())["choices"][0]["message"]["content"]);
  }
  const double passes0 = metric("hearth_forward_passes_total");
  const double seqs0 = metric("hearth_batch_sequences_total");
  std::vector<SseStream> got(kClients);
  {
    const LongStream anchor(server_->port(), chat("keep going", 4000));
    std::vector<std::thread> threads;
    for (int i = 0; i < kClients; ++i) {
      threads.emplace_back([&, i] {
        json b = bodies[i];
        b["stream_options"] = {{"include_usage", true}};
        got[i] = stream("/v1/chat/completions", b);
      });
    }
    for (auto& t : threads) t.join();
  }  // the anchor is cancelled
  EXPECT_TRUE(eventually([&] { return metric("hearth_active_sequences") == 0; }, 20));
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(got[i].done) << i;
    EXPECT_EQ(got[i].text, alone[i]) << i;
    EXPECT_EQ(got[i].usage["completion_tokens"], 12 + i) << i;
  }
  // The streams overlapped, so forward passes carried several sequences at once.
  const double passes = metric("hearth_forward_passes_total") - passes0;
  const double seqs = metric("hearth_batch_sequences_total") - seqs0;
  EXPECT_GT(passes, 0);
  EXPECT_GT(seqs, passes) << "concurrent requests were never batched together";
}

// Every bad input gets a 4xx and an OpenAI error object.
TEST_F(ServeTest, BadInputsGetErrorObjects) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/chat/completions", "{\"messages\": [", 400, ""},
      {"/v1/chat/completions", "[1,2]", 400, ""},
      {"/v1/chat/completions", "{}", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": "hi"})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": [{"content": "hi"}]})", 400, "messages[0].role"},
      {"/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400,
       "messages[0].role"},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {"/v1/chat/completions", "{" + msgs + R"(, "temperature": "hot"})", 400, "temperature"},
      {"/v1/chat/completions", "{" + msgs + R"(, "temperature": 9})", 400, "temperature"},
      {"/v1/chat/completions", "{" + msgs + R"(, "top_p": -1})", 400, "top_p"},
      {"/v1/chat/completions", "{" + msgs + R"(, "max_tokens": 0})", 400, "max_tokens"},
      {"/v1/chat/completions", "{" + msgs + R"(, "max_tokens": 2.5})", 400, "max_tokens"},
      {"/v1/chat/completions", "{" + msgs + R"(, "stop": 5})", 400, "stop"},
      {"/v1/chat/completions", "{" + msgs + R"(, "stop": ["a", 1]})", 400, "stop"},
      {"/v1/chat/completions", "{" + msgs + R"(, "stream": "yes"})", 400, "stream"},
      {"/v1/chat/completions", "{" + msgs + R"(, "seed": "x"})", 400, "seed"},
      {"/v1/chat/completions", "{" + msgs + R"(, "n": 9})", 400, "n"},
      {"/v1/chat/completions", "{" + msgs + R"(, "tools": [{"type": "function"}]})", 400,
       "tools[0]"},
      {"/v1/chat/completions", "{" + msgs + R"(, "response_format": {"type": "xml"}})", 400,
       "response_format.type"},
      {"/v1/chat/completions",
       "{" + msgs +
           R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a+"}}}})",
       400, "response_format"},
      {"/v1/chat/completions", "{" + msgs + R"(, "grammar": "root ::= undefined"})", 400,
       "grammar"},
      {"/v1/chat/completions", "{" + msgs + R"(, "logit_bias": {"x1": 5}})", 400, "logit_bias"},
      {"/v1/chat/completions", "{" + msgs + R"(, "logit_bias": {"1": 101}})", 400, "logit_bias"},
      {"/v1/chat/completions", "{" + msgs + R"(, "logit_bias": {"99999": 1}})", 400, "logit_bias"},
      {"/v1/chat/completions", "{" + msgs + R"(, "top_logprobs": 2})", 400, "top_logprobs"},
      {"/v1/chat/completions", "{" + msgs + R"(, "logprobs": true, "top_logprobs": 21})", 400,
       "top_logprobs"},
      {"/v1/completions", R"({"prompt": "x", "logprobs": 6})", 400, "logprobs"},
      {"/v1/completions", R"({"prompt": "x", "echo": true})", 400, "echo"},
      {"/v1/chat/completions", "{" + msgs + R"(, "stream_options": 1})", 400, "stream_options"},
      {"/v1/chat/completions", "{" + msgs + R"(, "model": 7})", 400, "model"},
      {"/v1/chat/completions", "{" + msgs + R"(, "model": "gpt-9"})", 404, "model"},
      {"/v1/completions", R"({"prompt": 5})", 400, "prompt"},
      {"/v1/completions", R"({"prompt": [1, 99999]})", 400, "prompt"},
      {"/v1/completions", R"({})", 400, "prompt"},
      {"/tokenize", R"({"content": 3})", 400, "content"},
      {"/detokenize", R"({"tokens": [1, -4]})", 400, "tokens"},
      {"/detokenize", R"({"tokens": [100000]})", 400, "tokens"},
      {"/v1/cancel", R"({"id": "chatcmpl-nope"})", 404, "id"},
      {"/v1/cancel", R"({"id": 3})", 400, "id"},
  };
  for (const auto& c : cases) {
    const auto [status, err] = post_err(c.path, c.body);
    EXPECT_EQ(status, c.status) << c.path << " " << c.body;
    if (!c.param.empty()) {
      EXPECT_EQ(err["param"], c.param) << c.body;
    }
  }
  // Context overflow: a prompt longer than -c 4096.
  std::string long_text;
  for (int i = 0; i < 2500; ++i) long_text += "word" + std::to_string(i) + " ";
  const auto [status, err] =
      post_err("/v1/chat/completions",
               json{{"messages", {{{"role", "user"}, {"content", long_text}}}}}.dump());
  EXPECT_EQ(status, 400);
  EXPECT_EQ(err["code"], "context_length_exceeded");
  // Unknown route.
  auto c = server_->client();
  auto r = c.Get("/v2/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
}

TEST_F(ServeTest, ClientDisconnectCancelsGeneration) {
  const std::string key = "hearth_requests_finished_total{reason=\"cancelled\"}";
  for (const bool streamed : {true, false}) {
    const double before = std::max(0.0, metric(key));
    const int fd = connect_to(server_->port());
    ASSERT_GE(fd, 0);
    // Far more tokens than the test waits for: only the disconnect can end it early.
    json body = chat("never ending", 4000);
    body["stream"] = streamed;
    ASSERT_TRUE(send_all(fd, http_post("/v1/chat/completions", body.dump())));
    if (streamed) {
      char buf[256];
      ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // the stream started
    } else {
      ASSERT_TRUE(eventually([&] { return metric("hearth_active_sequences") >= 1; }, 10));
    }
    close(fd);
    EXPECT_TRUE(eventually([&] { return metric(key) >= before + 1; }, 20))
        << "streamed=" << streamed;
  }
  EXPECT_TRUE(eventually([&] { return metric("hearth_active_sequences") == 0; }, 20));
}

TEST_F(ServeTest, CancelById) {
  auto c = server_->client();
  std::atomic<bool> started{false};
  std::string id, body;
  std::thread t([&] {
    json b = chat("long one", 4000);
    b["stream"] = true;
    auto cc = server_->client();
    post_streaming(cc, "/v1/chat/completions", {}, b.dump(), [&](const char* data, size_t n) {
      body.append(data, n);
      if (id.empty()) {
        const auto s = parse_sse(body.substr(0, body.rfind("\n\n") + 2));
        if (!s.events.empty()) {
          id = s.events.front()["id"];
          started = true;
        }
      }
      return true;
    });
  });
  ASSERT_TRUE(eventually([&] { return started.load(); }, 20));
  auto r = c.Post("/v1/cancel", json{{"id", id}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  t.join();
  const SseStream s = parse_sse(body);
  EXPECT_TRUE(s.done);
  EXPECT_EQ(s.finish_reason, "cancelled");
}

// Generation that runs into the end of the context stops there with finish_reason "length"
// (plain and streamed, two at once), and the server goes on serving. The server runs with
// q8_0 K and V caches, as `-ctk q8_0 -ctv q8_0` asks.
TEST(ServeContext, FillingTheContextEndsWithLength) {
  ServeProc server({"--parallel", "2", "-c", "64", "-ctk", "q8_0", "-ctv", "q8_0"});
  const json body = {{"messages", {{{"role", "user"}, {"content", "count to a thousand"}}}},
                     {"max_tokens", 1000},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  std::string stream_body;
  std::thread t([&] {
    auto c = server.client();
    auto r = c.Post("/v1/chat/completions", streamed.dump(), "application/json");
    if (r && r->status == 200) stream_body = r->body;
  });
  auto c = server.client();
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  t.join();
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const int total = j["usage"]["total_tokens"].get<int>();
  EXPECT_GE(total, 63) << r->body;  // prompt + completion fill the 64 positions
  EXPECT_LE(total, 65) << r->body;
  const SseStream s = parse_sse(stream_body);
  EXPECT_TRUE(s.done) << stream_body;
  EXPECT_EQ(s.finish_reason, "length");
  ASSERT_TRUE(s.usage.is_object()) << stream_body;
  EXPECT_EQ(s.usage["total_tokens"], j["usage"]["total_tokens"]);
  const json small = {{"prompt", "hi"}, {"max_tokens", 3}, {"temperature", 0}};
  auto after = c.Post("/v1/completions", small.dump(), "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200) << after->body;
}

// A chat client resends the whole conversation each turn: the second turn reuses the first
// turn's cached prompt (and what it generated) and computes only the rest, with the same
// greedy answer as a server that starts every request from nothing.
TEST(ServePromptCache, TheNextTurnReusesTheConversationsCache) {
  ServeProc cached({"--parallel", "2"}), fresh({"--parallel", "2", "--no-prompt-cache"});
  auto cached_tokens = [](ServeProc& server) {
    return server.metric("hearth_prompt_tokens_cached_total");
  };
  auto ask = [](ServeProc& server, const json& messages) {
    auto c = server.client();
    const json body = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}};
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    return r ? json::parse(r->body) : json();
  };
  json turn = json::array({{{"role", "system"}, {"content", "be brief"}},
                           {{"role", "user"}, {"content", "tell me about the hearth fire"}}});
  const json a = ask(cached, turn);
  EXPECT_EQ(cached_tokens(cached), 0.0);
  const std::string answer = a["choices"][0]["message"]["content"].get<std::string>();
  turn.push_back({{"role", "assistant"}, {"content", answer}});
  turn.push_back({{"role", "user"}, {"content", "and the smoke?"}});
  const json b = ask(cached, turn);
  const double reused = cached_tokens(cached);
  // At least the whole first prompt came from the cache, short of the second prompt.
  EXPECT_GE(reused, a["usage"]["prompt_tokens"].get<double>()) << b.dump();
  EXPECT_LT(reused, b["usage"]["prompt_tokens"].get<double>()) << b.dump();
  EXPECT_EQ(b["choices"][0]["message"]["content"],
            ask(fresh, turn)["choices"][0]["message"]["content"]);
  EXPECT_EQ(cached_tokens(fresh), 0.0);
  // The same request again: everything but its last prompt token is reused, same answer.
  const json again = ask(cached, turn);
  EXPECT_EQ(again["choices"][0]["message"]["content"], b["choices"][0]["message"]["content"]);
  EXPECT_EQ(cached_tokens(cached), reused + b["usage"]["prompt_tokens"].get<double>() - 1);
  // OpenAI's usage field says the same per request.
  EXPECT_EQ(a["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"].get<double>(), reused);
  EXPECT_EQ(again["usage"]["prompt_tokens_details"]["cached_tokens"],
            b["usage"]["prompt_tokens"].get<int>() - 1);
}

// Speculative decoding in the server: concurrent greedy requests (one with logprobs, one held
// to a JSON object) answer as a server without drafts does, with both drafters; usage and
// /metrics count the drafts and the trips.
TEST(ServeDrafting, ConcurrentRequestsAnswerAsWithoutDrafts) {
  ServeProc plain({"--parallel", "4"});
  ServeProc self({"--parallel", "4", "-md", tiny_model(), "--draft-p-min", "0"});
  ServeProc lookup({"--parallel", "4", "--draft-lookup", "--draft-ngram-min", "1"});
  std::vector<json> bodies;
  for (int i = 0; i < 4; ++i) {
    json b = {
        {"messages",
         {{{"role", "user"},
           {"content", "the fire in the hearth, the fire in the hearth " + std::to_string(i)}}}},
        {"max_tokens", 14 + i},
        {"temperature", 0}};
    if (i == 1) {
      b["logprobs"] = true;
      b["top_logprobs"] = 2;
    }
    if (i == 2) b["response_format"] = {{"type", "json_object"}};
    bodies.push_back(b);
  }
  auto ask_all = [&](ServeProc& server) {
    std::vector<json> got(bodies.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < bodies.size(); ++i) {
      threads.emplace_back([&, i] {
        auto c = server.client();
        auto r = c.Post("/v1/chat/completions", bodies[i].dump(), "application/json");
        if (r && r->status == 200) got[i] = json::parse(r->body);
      });
    }
    for (auto& t : threads) t.join();
    return got;
  };
  const auto want = ask_all(plain);
  for (ServeProc* server : {&self, &lookup}) {
    const auto got = ask_all(*server);
    int64_t accepted = 0, drafted = 0, generated = 0, free_drafted = 0, free_accepted = 0;
    for (size_t i = 0; i < bodies.size(); ++i) {
      ASSERT_TRUE(want[i].is_object() && got[i].is_object()) << i << server->log();
      EXPECT_EQ(got[i]["choices"][0]["message"], want[i]["choices"][0]["message"]) << i;
      EXPECT_EQ(got[i]["choices"][0]["logprobs"], want[i]["choices"][0]["logprobs"]) << i;
      EXPECT_EQ(got[i]["usage"]["completion_tokens"], want[i]["usage"]["completion_tokens"]);
      const json& d = got[i]["usage"]["completion_tokens_details"];
      accepted += d["accepted_prediction_tokens"].get<int64_t>();
      drafted += d["accepted_prediction_tokens"].get<int64_t>() +
                 d["rejected_prediction_tokens"].get<int64_t>();
      generated += got[i]["usage"]["completion_tokens"].get<int64_t>();
      if (i != 2) {  // the drafters do not know request 2's grammar
        free_accepted += d["accepted_prediction_tokens"].get<int64_t>();
        free_drafted += d["accepted_prediction_tokens"].get<int64_t>() +
                        d["rejected_prediction_tokens"].get<int64_t>();
      }
      EXPECT_EQ(want[i]["usage"]["completion_tokens_details"]["accepted_prediction_tokens"], 0);
    }
    EXPECT_GT(drafted, 0);
    if (server == &self) {
      EXPECT_GT(free_drafted, 0);
      EXPECT_EQ(free_accepted, free_drafted);  // the model drafting for itself
    }
    auto c = server->client();
    auto m = c.Get("/metrics");
    ASSERT_TRUE(m);
    auto value = [&](const std::string& name) {
      const size_t at = m->body.find("\n" + name + " ");
      return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size() + 2));
    };
    EXPECT_EQ(value("hearth_draft_tokens_total"), static_cast<double>(drafted));
    EXPECT_EQ(value("hearth_draft_accepted_tokens_total"), static_cast<double>(accepted));
    // Every decoding trip gives one token plus its accepted drafts; each request's first
    // token comes from its prompt's pass.
    EXPECT_EQ(value("hearth_decode_trips_total") + static_cast<double>(accepted),
              static_cast<double>(generated) - static_cast<double>(bodies.size()));
  }
}

// A second server with a key, a small body limit, a short read timeout and a queue of one.
class GuardedServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServeProc>(
        std::vector<std::string>{"--api-key", "sesame", "--max-body", "4096", "--read-timeout", "1",
                                 "--parallel", "1", "--queue", "1", "-c", "4096"});
  }
  static void TearDownTestSuite() { server_.reset(); }
  static inline std::unique_ptr<ServeProc> server_;
  static httplib::Headers auth() { return {{"Authorization", "Bearer sesame"}}; }
};

TEST_F(GuardedServeTest, ApiKeyRequired) {
  auto c = server_->client();
  const std::string body = R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2})";
  auto none = c.Post("/v1/chat/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "invalid_api_key");
  auto wrong =
      c.Post("/v1/chat/completions", {{"Authorization", "Bearer nope"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  auto ok = c.Post("/v1/chat/completions", auth(), body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(GuardedServeTest, BodyTooLarge) {
  auto c = server_->client();
  const std::string big = json{{"prompt", std::string(8000, 'a')}}.dump();
  auto r = c.Post("/v1/completions", auth(), big, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_TRUE(json::parse(r->body).contains("error"));
}

TEST_F(GuardedServeTest, SlowClientIsDropped) {
  const int fd = connect_to(server_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd,
                       "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                       "sesame\r\nContent-Length: 100\r\n\r\n{\"pro"));
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 8000), 1) << "the server kept a silent client past its read timeout";
  char buf[512];
  const ssize_t n = recv(fd, buf, sizeof buf, 0);
  // Closed, or an error response followed by close: never a completion.
  EXPECT_TRUE(n <= 0 ||
              std::string(buf, static_cast<size_t>(n)).find(" 200 ") == std::string::npos);
  close(fd);
}

TEST_F(GuardedServeTest, FullQueueGets429) {
  // A occupies the one slot, B waits in the one queue place, C is refused.
  std::atomic<bool> a_started{false};
  std::string a_body;
  std::thread a([&] {
    auto c = server_->client();
    const json b = {{"prompt", "x"},
                    {"max_tokens", 3000},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"stream", true}};
    post_streaming(c, "/v1/completions", auth(), b.dump(), [&](const char* d, size_t n) {
      a_body.append(d, n);
      a_started = true;
      return true;
    });
  });
  ASSERT_TRUE(eventually([&] { return a_started.load(); }, 20));
  int b_status = 0;
  std::thread b([&] {
    auto c = server_->client();
    auto r =
        c.Post("/v1/completions", auth(), R"({"prompt":"y","max_tokens":3})", "application/json");
    if (r) b_status = r->status;
  });
  auto c = server_->client();
  auto queued = [&] {
    auto m = c.Get("/metrics", auth());
    return m && m->body.find("\nhearth_queue_depth 1\n") != std::string::npos;
  };
  ASSERT_TRUE(eventually(queued, 20));
  auto r =
      c.Post("/v1/completions", auth(), R"({"prompt":"z","max_tokens":3})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "queue_full");
  // Cancel A (its id is in its first chunk); B then runs and succeeds.
  const auto first = a_body.find("\"id\":\"");
  ASSERT_NE(first, std::string::npos);
  const std::string id = a_body.substr(first + 6, a_body.find('"', first + 6) - first - 6);
  auto cr = c.Post("/v1/cancel", auth(), json{{"id", id}}.dump(), "application/json");
  ASSERT_TRUE(cr);
  EXPECT_EQ(cr->status, 200);
  a.join();
  b.join();
  EXPECT_EQ(b_status, 200);
}

TEST(ServeShutdown, SigtermStopsCleanlyWithRunningStreams) {
  ServeProc s;
  std::thread t([&] {
    auto c = s.client();
    c.Post("/v1/completions", R"({"prompt":"x","max_tokens":200,"ignore_eos":true,"stream":true})",
           "application/json");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const int status = s.terminate();
  t.join();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace hearth::serve::testing
