// Tool calls: real templates render tools as the reference renderer does, replies parse back
// into calls in both families, and a required call's grammar admits exactly the calls.
#include "hearth/text/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hearth/base/error.h"
#include "hearth/text/chat.h"
#include "hearth/text/grammar.h"

namespace hearth::text {
namespace {

using nlohmann::ordered_json;

ordered_json fixture() {
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/chat_templates.json");
  return ordered_json::parse(in);
}

TEST(ToolCalls, RealTemplatesRenderToolsLikeTheReference) {
  const ordered_json fx = fixture();
  int checked = 0;
  for (const auto& c : fx.at("tool_cases")) {
    const std::string tmpl = fx.at("templates").at(c.at("template").get<std::string>());
    const auto& conv = fx.at("tool_conversations").at(c.at("conversation").get<std::string>());
    EXPECT_EQ(render_chat(tmpl, conv.at("messages"), conv.at("tools"), true,
                          c.at("bos_token").get<std::string>(), ""),
              c.at("expected").get<std::string>())
        << c.at("template") << "/" << c.at("conversation");
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(ToolCalls, FormatIsReadFromTheTemplate) {
  const ordered_json fx = fixture();
  const auto& t = fx.at("templates");
  EXPECT_EQ(detect_tool_format(t.at("llama3.1").get<std::string>()), ToolFormat::kLlama3Json);
  EXPECT_EQ(detect_tool_format(t.at("qwen2.5").get<std::string>()), ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format(t.at("qwen3-2507").get<std::string>()), ToolFormat::kHermes);
  EXPECT_EQ(detect_tool_format(t.at("llama3").get<std::string>()), ToolFormat::kNone);
  EXPECT_EQ(detect_tool_format(t.at("chatml").get<std::string>()), ToolFormat::kNone);
  EXPECT_EQ(detect_tool_format(*builtin_chat_template("llama3")), ToolFormat::kNone);
}

TEST(ToolCalls, HermesRepliesParse) {
  const auto f = ToolFormat::kHermes;
  auto r = parse_tool_calls(
      f,
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", "
      "\"unit\": \"celsius\"}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"location":"Paris","unit":"celsius"})");  // order kept
  EXPECT_EQ(r.content, "");
  // Text around calls, two calls, a missing closing tag at the end.
  r = parse_tool_calls(f,
                       "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n"
                       "</tool_call>\n<tool_call>{\"name\": \"b\", \"arguments\": "
                       "\"{\\\"x\\\": 1}\"}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.content, "Let me look.");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments, R"({"x":1})");  // arguments written as a string of JSON
  // Not calls: text as it is.
  for (const char* s : {"plain answer", "<tool_call>\n{\"name\": 3}\n</tool_call>",
                        "<tool_call>{\"name\": \"a\"}</tool_call>", "<tool_call>{oops",
                        "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>"}) {
    r = parse_tool_calls(f, s);
    EXPECT_TRUE(r.calls.empty()) << s;
    EXPECT_EQ(r.content, s);
  }
}

TEST(ToolCalls, Llama3RepliesParse) {
  const auto f = ToolFormat::kLlama3Json;
  auto r = parse_tool_calls(f, " {\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_time");
  EXPECT_EQ(r.calls[0].arguments, R"({"zone":"UTC"})");
  r = parse_tool_calls(f,
                       "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"}{\"}}; "
                       "{\"name\": \"b\", \"arguments\": {}}");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments, R"({"s":"}{"})");  // braces inside strings do not count
  EXPECT_EQ(r.calls[1].name, "b");
  for (const char* s : {"It is sunny.", "{\"name\": \"a\", \"parameters\": {}} and more",
                        "{\"answer\": 42}", "{\"name\": \"a\", \"parameters\": {"}) {
    r = parse_tool_calls(f, s);
    EXPECT_TRUE(r.calls.empty()) << s;
    EXPECT_EQ(r.content, s);
  }
}

TEST(ToolCalls, StreamedTextIsAPrefixOfTheFinalText) {
  const std::string replies[] = {
      "Let me look.  \n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>",
      "Sure <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> done",
      "a < b and <tool_ but not a call",
      "{\"name\": \"a\", \"parameters\": {}}",
      "  plain words, then {braces}",
  };
  for (auto f : {ToolFormat::kHermes, ToolFormat::kLlama3Json}) {
    for (const std::string& reply : replies) {
      const std::string final_text = parse_tool_calls(f, reply).content;
      size_t sent = 0;
      // Every split point: what was sent never shrinks and stays a prefix of the final text.
      for (size_t n = 0; n <= reply.size(); ++n) {
        const size_t ready = tool_text_prefix(f, std::string_view(reply).substr(0, n));
        sent = std::max(sent, ready);
        ASSERT_EQ(final_text.compare(0, sent, reply, 0, sent), 0)
            << tool_format_name(f) << " " << reply << " at " << n;
      }
    }
  }
  // Hermes streams text up to a possible tag, less the blanks before it.
  EXPECT_EQ(tool_text_prefix(ToolFormat::kHermes, "Hi there <tool_c"), 8u);
  EXPECT_EQ(tool_text_prefix(ToolFormat::kHermes, "Hi there"), 8u);
  EXPECT_EQ(tool_text_prefix(ToolFormat::kLlama3Json, "Hi"), 2u);
  EXPECT_EQ(tool_text_prefix(ToolFormat::kLlama3Json, " {\"na"), 0u);
}

bool matches(const std::string& grammar, const std::string& text) {
  GrammarMatcher m(std::make_shared<const Grammar>(parse_grammar(grammar)));
  return m.accept(text) && m.complete();
}

TEST(ToolCalls, RequiredCallGrammarAdmitsExactlyTheCalls) {
  const ordered_json fx = fixture();
  const auto& tools = fx.at("tool_conversations").at("ask").at("tools");
  const std::string hermes = tool_call_grammar(ToolFormat::kHermes, tools, "");
  EXPECT_TRUE(matches(hermes,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                      "{\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"));
  EXPECT_TRUE(matches(hermes,
                      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                      "{\"zone\": \"UTC\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(hermes,
                       "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                       "{}}\n</tool_call>"));  // required argument missing
  EXPECT_FALSE(matches(hermes,
                       "<tool_call>\n{\"name\": \"nope\", \"arguments\": "
                       "{\"zone\": \"UTC\"}}\n</tool_call>"));
  EXPECT_FALSE(matches(hermes,
                       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                       "{\"location\": \"Paris\", \"unit\": \"kelvin\"}}\n</tool_call>"));
  const std::string llama = tool_call_grammar(ToolFormat::kLlama3Json, tools, "get_time");
  EXPECT_TRUE(matches(llama, "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}"));
  EXPECT_FALSE(matches(llama,
                       "{\"name\": \"get_weather\", \"parameters\": {\"location\": "
                       "\"Paris\"}}"));  // another tool than the one forced
  // Every call the grammar admits parses back as a call.
  const auto r = parse_tool_calls(ToolFormat::kLlama3Json,
                                  "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_THROW(tool_call_grammar(ToolFormat::kHermes, tools, "missing"), UsageError);
  ordered_json bad = ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "string",
          "pattern": "^a+$"}}}])");
  try {
    tool_call_grammar(ToolFormat::kHermes, bad, "");
    ADD_FAILURE() << "a schema keyword outside the subset was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pattern"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hearth::text
