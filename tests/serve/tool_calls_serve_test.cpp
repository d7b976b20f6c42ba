// Tool calls through a real server for both template families (Llama 3.1 and Qwen 2.5, their
// real templates given with --chat-template-file): required and named calls come back as
// message.tool_calls whose arguments fit the tool's schema, streamed and plain agree, and a
// conversation that carries earlier calls and their results renders.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "serve/serve_process.h"

namespace hearth::serve::testing {
namespace {

using nlohmann::json;

// The fixture's template `name` written to a file for --chat-template-file.
std::string template_file(const std::string& name) {
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/chat_templates.json");
  const json fx = json::parse(in);
  const std::string path = (test_dir() / (name + ".jinja")).string();
  std::ofstream(path) << fx.at("templates").at(name).get<std::string>();
  return path;
}

// Two tools; string lengths are bounded so that a random model's arguments end in time.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "location": {"type": "string", "maxLength": 12},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location"]}}},
  {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
    "parameters": {"type": "object", "properties": {
      "zone": {"type": "string", "maxLength": 8}, "hour24": {"type": "boolean"}},
    "required": ["zone", "hour24"]}}}])");

// Whether a call's arguments fit its tool's schema above.
void expect_fits(const json& call) {
  ASSERT_EQ(call["type"], "function") << call;
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u) << call;
  const std::string name = call["function"]["name"];
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object()) << call;
  if (name == "get_weather") {
    ASSERT_TRUE(args.contains("location") && args["location"].is_string()) << args;
    if (args.contains("unit")) {
      EXPECT_TRUE(args["unit"] == "celsius" || args["unit"] == "fahrenheit") << args;
    }
    for (auto it = args.begin(); it != args.end(); ++it) {
      EXPECT_TRUE(it.key() == "location" || it.key() == "unit") << args;
    }
  } else {
    ASSERT_EQ(name, "get_time") << call;
    EXPECT_TRUE(args["zone"].is_string()) << args;
    EXPECT_TRUE(args["hour24"].is_boolean()) << args;
    EXPECT_EQ(args.size(), 2u) << args;
  }
}

class ToolCallsServe : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    server_ = std::make_unique<ServeProc>(
        std::vector<std::string>{"--chat-template-file", template_file(GetParam()), "-c", "2048"});
  }
  std::pair<int, json> post(const json& body) {
    auto c = server_->client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    if (!r) return {0, json()};
    return {r->status, json::parse(r->body)};
  }
  SseStream post_stream(json body) {
    body["stream"] = true;
    auto c = server_->client();
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r ? parse_sse(r->body) : SseStream{};
  }
  std::unique_ptr<ServeProc> server_;
};

json ask(uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", "What is the weather in Paris?"}}}},
          {"tools", kTools},
          {"tool_choice", "required"},
          {"temperature", 1},
          {"seed", seed},
          {"max_tokens", 300}};
}

TEST_P(ToolCallsServe, RequiredCallsFitTheirSchemaStreamedAndPlain) {
  std::set<std::string> names;
  // At least eight seeds, and on until a random model has chosen both tools (at most 24).
  for (uint64_t seed = 1; seed <= 24 && (seed <= 8 || names.size() < 2); ++seed) {
    const auto [status, plain] = post(ask(seed));
    ASSERT_EQ(status, 200) << plain;
    const json& choice = plain["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << plain;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << plain;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << plain;
    const json& call = choice["message"]["tool_calls"][0];
    expect_fits(call);
    names.insert(call["function"]["name"].get<std::string>());

    // The same seed streamed: the call arrives in delta.tool_calls, the same as plain.
    const SseStream s = post_stream(ask(seed));
    EXPECT_TRUE(s.done);
    EXPECT_EQ(s.finish_reason, "tool_calls");
    EXPECT_EQ(s.text, "");
    json streamed_name, streamed_args = "";
    for (const auto& ev : s.events) {
      for (const auto& c : ev["choices"]) {
        if (!c.contains("delta") || !c["delta"].contains("tool_calls")) continue;
        for (const auto& tc : c["delta"]["tool_calls"]) {
          EXPECT_EQ(tc["index"], 0);
          if (tc["function"].contains("name")) streamed_name = tc["function"]["name"];
          streamed_args =
              streamed_args.get<std::string>() + tc["function"].value("arguments", std::string());
        }
      }
    }
    EXPECT_EQ(streamed_name, call["function"]["name"]);
    EXPECT_EQ(streamed_args, call["function"]["arguments"]);
  }
  EXPECT_EQ(names.size(), 2u) << "24 seeds should reach both tools";
}

TEST_P(ToolCallsServe, NamedToolIsTheOneCalled) {
  json body = ask(3);
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const auto [status, r] = post(body);
  ASSERT_EQ(status, 200) << r;
  const json& call = r["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(call["function"]["name"], "get_time") << r;
  expect_fits(call);
}

TEST_P(ToolCallsServe, ConversationWithCallsAndResultsRenders) {
  const json body = {{"messages", json::parse(R"([{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
           "type": "function", "function": {"name": "get_weather",
           "arguments": "{\"location\": \"Paris\"}"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}])")},
                     {"tools", kTools},
                     {"temperature", 0},
                     {"max_tokens", 8}};
  const auto [status, r] = post(body);
  ASSERT_EQ(status, 200) << r;
  const std::string reason = r["choices"][0]["finish_reason"];
  EXPECT_TRUE(reason == "stop" || reason == "length" || reason == "tool_calls") << r;
  // The prompt holds the call and its result: it is longer than the question alone.
  json plain = body;
  plain["messages"] = {{{"role", "user"}, {"content", "Weather in Paris?"}}};
  const auto [status2, r2] = post(plain);
  ASSERT_EQ(status2, 200) << r2;
  EXPECT_GT(r["usage"]["prompt_tokens"].get<int>(), r2["usage"]["prompt_tokens"].get<int>() + 10);
}

TEST_P(ToolCallsServe, BadToolRequestsAreRefusedNamingTheField) {
  const std::pair<json, std::string> cases[] = {
      {{{"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}, "tool_choice"},
      {{{"tool_choice", "sometimes"}}, "tool_choice"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "bad name!"}}}}}}},
       "tools[0].function.name"},
      {{{"tools", {{{"type", "retrieval"}}}}}, "tools[0]"},
      {{{"tools", json::parse(R"([{"type": "function", "function": {"name": "f",
          "parameters": {"type": "object", "properties": {"s": {"type": "string",
          "pattern": "a+"}}}}}])")}},
       "tools"},
      {{{"response_format", {{"type", "json_object"}}}}, "tool_choice"},
  };
  for (const auto& [patch, param] : cases) {
    json body = ask(1);
    body.merge_patch(patch);
    const auto [status, r] = post(body);
    EXPECT_EQ(status, 400) << patch << " -> " << r;
    EXPECT_EQ(r["error"]["param"], param) << patch << " -> " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Families, ToolCallsServe, ::testing::Values("llama3.1", "qwen2.5", "qwen3-2507"),
    [](const auto& info) {
      const std::string p = info.param;
      return std::string(p == "llama3.1" ? "Llama31" : p == "qwen2.5" ? "Qwen25" : "Qwen3");
    });

TEST(ToolCallsServeErrors, TemplateWithoutToolsAndCompletionsRefuseTools) {
  ServeProc server;
  auto c = server.client();
  json body = ask(1);
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "tools") << r->body;
  // tool_choice "none" leaves the tools out: any template will do.
  body["tool_choice"] = "none";
  body["max_tokens"] = 4;
  r = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = c.Post("/v1/completions", json{{"prompt", "hi"}, {"tools", kTools}}.dump(),
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "tools") << r->body;
}

// chat_template_kwargs reach the template: Qwen 3's enable_thinking = false closes an empty
// think block after the generation prompt, which costs prompt tokens; variables the server
// sets, and the field on /v1/completions, are refused naming it.
TEST(ChatTemplateKwargs, EnableThinkingReachesTheTemplate) {
  ServeProc server({"--chat-template-file", template_file("qwen3-thinking-switch")});
  auto c = server.client();
  auto prompt_tokens = [&](const json& kwargs) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}}, {"max_tokens", 1}};
    if (!kwargs.is_null()) body["chat_template_kwargs"] = kwargs;
    auto r = c.Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return -1;
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body)["usage"]["prompt_tokens"].get<int>();
  };
  const int plain = prompt_tokens(nullptr);
  EXPECT_EQ(prompt_tokens({{"enable_thinking", true}}), plain);
  EXPECT_GT(prompt_tokens({{"enable_thinking", false}}), plain);
  for (const std::string bad : {R"("yes")", R"({"messages": []})", R"({"bos_token": "x"})"}) {
    const std::string body =
        R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": )" + bad + "}";
    auto r = c.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(json::parse(r->body)["error"]["param"], "chat_template_kwargs") << r->body;
  }
  auto r = c.Post("/v1/completions",
                  R"({"prompt": "hi", "chat_template_kwargs": {"enable_thinking": false}})",
                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "chat_template_kwargs") << r->body;
}

}  // namespace
}  // namespace hearth::serve::testing
