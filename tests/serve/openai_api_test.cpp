#include "hearth/serve/openai_api.h"

#include <gtest/gtest.h>

namespace hearth::serve {
namespace {

// The status and param of the ApiError a body raises.
std::pair<int, std::string> chat_error(const std::string& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& e) {
    return {e.status, e.param};
  }
  return {0, ""};
}

TEST(OpenAiApi, ChatDefaultsFollowOpenAi) {
  const auto r = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["role"], "user");
  EXPECT_EQ(r.messages[0]["content"], "hi");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.seed_given);
}

TEST(OpenAiApi, ChatFieldsParsed) {
  const auto r = parse_chat_request(R"({
    "model": "m", "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},
    {"type": "text", "text": "b"}]}, {"role": "assistant", "content": null}],
    "temperature": 0, "top_p": 0.5, "max_completion_tokens": 9, "stop": ["x", "y"], "seed": 7,
    "stream": true, "stream_options": {"include_usage": true}, "n": 1})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[0]["content"], "ab");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(OpenAiApi, BadChatBodiesNameTheParam) {
  EXPECT_EQ(chat_error("not json").first, 400);
  EXPECT_EQ(chat_error("[]").first, 400);
  EXPECT_EQ(chat_error(R"({"messages": []})"), std::make_pair(400, std::string("messages")));
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
            std::make_pair(400, std::string("messages[0].content")));
  EXPECT_EQ(
      chat_error(R"({"messages": [{"role":"user","content":"x"}], "max_tokens": 99999999999})"),
      std::make_pair(400, std::string("max_tokens")));
  EXPECT_EQ(chat_error(R"({"messages": [{"role":"user","content":"x"}], "top_p": true})"),
            std::make_pair(400, std::string("top_p")));
  EXPECT_EQ(
      chat_error(
          R"({"messages": [{"role":"user","content":"x"}], "stream_options": {"include_usage": 1}})"),
      std::make_pair(400, std::string("stream_options.include_usage")));
}

// Members of the wrong JSON type are a 400, never an escaping json exception (openai_fuzz found
// "type": [...] in a tool and in tool_choice).
TEST(OpenAiApi, ToolMembersOfTheWrongTypeAreRefused) {
  const std::string msgs = R"("messages": [{"role":"user","content":"x"}])";
  EXPECT_EQ(chat_error("{" + msgs + R"(, "tools": [{"type": [1], "function": {"name": "f"}}]})"),
            std::make_pair(400, std::string("tools[0]")));
  EXPECT_EQ(chat_error("{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": "f"}}],
               "tool_choice": {"type": {"a": 1}, "function": {"name": "f"}}})"),
            std::make_pair(400, std::string("tool_choice")));
  EXPECT_EQ(
      chat_error("{" + msgs + R"(, "tools": [{"type": "function", "function": {"name": 7}}]})"),
      std::make_pair(400, std::string("tools[0].function.name")));
}

TEST(OpenAiApi, CompletionPromptForms) {
  EXPECT_EQ(parse_completion_request(R"({"prompt": "a"})").prompt, "a");
  EXPECT_EQ(parse_completion_request(R"({"prompt": ["b"]})").prompt, "b");
  EXPECT_EQ(parse_completion_request(R"({"prompt": [1, 2]})").prompt_ids,
            (std::vector<int32_t>{1, 2}));
  EXPECT_THROW(parse_completion_request(R"({"prompt": ["a", "b"]})"), ApiError);
  EXPECT_THROW(parse_completion_request(R"({"prompt": [1, "b"]})"), ApiError);
  EXPECT_THROW(parse_completion_request(R"({"prompt": [-1]})"), ApiError);
}

TEST(OpenAiApi, ErrorObjectHasAllFields) {
  const auto j =
      error_json(ApiError(404, "gone", "invalid_request_error", "model", "model_not_found"));
  EXPECT_EQ(j["error"]["message"], "gone");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "model");
  EXPECT_EQ(j["error"]["code"], "model_not_found");
  const auto k = error_json(ApiError(400, "bad"));
  EXPECT_TRUE(k["error"]["param"].is_null());
  EXPECT_TRUE(k["error"]["code"].is_null());
}

}  // namespace
}  // namespace hearth::serve
