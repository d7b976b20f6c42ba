// Tool calls in a model's own words. A chat template that knows tools renders the request's
// tool list into the prompt and tells the model how to call one; the reply is then parsed back
// into calls. Two families are known:
//   - Llama 3.1+ (kLlama3Json): the whole reply is {"name": ..., "parameters": {...}},
//     optionally after <|python_tag|>; several calls are separated by ';'.
//   - Qwen 2.5 and Hermes-style templates (kHermes): any number of
//     <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> blocks, with text around them.
// The family is read from the template's text, so a model's own template decides.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

enum class ToolFormat { kNone, kLlama3Json, kHermes };

// The tool-call format `chat_template` teaches the model, or kNone when it mentions none.
ToolFormat detect_tool_format(std::string_view chat_template);
const char* tool_format_name(ToolFormat f);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text (OpenAI's function.arguments), key order kept
};

struct ParsedReply {
  std::string content;  // the text that is not a call
  std::vector<ToolCall> calls;
};

// Splits a finished reply into text and calls. A block that does not hold a well-formed call
// ({"name": string, "arguments" or "parameters": object}) stays text, as does all of a Llama
// reply that is not calls only.
ParsedReply parse_tool_calls(ToolFormat f, std::string_view reply);

// While a reply streams: how many of its first bytes are text for sure, that is, cannot become
// part of a call whatever follows. The rest is held until the reply ends (and parse_tool_calls
// decides). The text parse_tool_calls returns always starts with this prefix.
size_t tool_text_prefix(ToolFormat f, std::string_view reply);

// A GBNF grammar (text/grammar.h) whose sentences are exactly one call in format `f` to one of
// `tools` (OpenAI's [{"type": "function", "function": {name, parameters}}]), its arguments
// held to the tool's parameter schema; only to the tool named `only` when it is not empty.
// UsageError naming the tool when a schema is outside what json_schema.h covers, or `only`
// is not among the tools.
std::string tool_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools,
                              std::string_view only);

}  // namespace hearth::text
