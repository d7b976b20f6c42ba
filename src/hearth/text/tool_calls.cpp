#include "hearth/text/tool_calls.h"

#include <fmt/core.h>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/text/json_schema.h"

namespace hearth::text {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the JSON object at the start of `s` (which starts with '{'), found by
// balancing braces outside strings; 0 when it does not close.
size_t object_length(std::string_view s) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return 0;
}

// {"name": "...", "arguments" | "parameters": {...}} as a call; false for anything else.
bool as_call(std::string_view text, ToolCall& out) {
  const auto j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return false;
  }
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  if (args == j.end()) return false;
  // Some models write the arguments as a JSON string holding the object.
  ordered_json obj = *args;
  if (obj.is_string()) obj = ordered_json::parse(obj.get<std::string>(), nullptr, false);
  if (!obj.is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = obj.dump();
  return true;
}

ParsedReply parse_llama3(std::string_view reply) {
  std::string_view rest = trim(reply);
  if (rest.substr(0, kPythonTag.size()) == kPythonTag) rest = trim(rest.substr(kPythonTag.size()));
  ParsedReply out;
  while (!rest.empty()) {
    if (rest.front() != '{') return {std::string(reply), {}};
    const size_t len = object_length(rest);
    ToolCall call;
    if (len == 0 || !as_call(rest.substr(0, len), call)) return {std::string(reply), {}};
    out.calls.push_back(std::move(call));
    rest = trim(rest.substr(len));
    if (!rest.empty() && rest.front() == ';') rest = trim(rest.substr(1));
  }
  if (out.calls.empty()) out.content = std::string(reply);
  return out;
}

// Text around the blocks is kept, less the blanks that touch a block: the prefix before the
// first block loses its trailing blanks, exactly what the stream holds back (tool_text_prefix).
ParsedReply parse_hermes(std::string_view reply) {
  ParsedReply out;
  size_t pos = 0;
  std::string content;
  while (true) {
    const size_t open = reply.find(kCallOpen, pos);
    if (open == std::string_view::npos) break;
    const size_t body = open + kCallOpen.size();
    size_t close = reply.find(kCallClose, body);
    // A reply may end (end of generation) right after the object, without the closing tag.
    const bool closed = close != std::string_view::npos;
    if (!closed) close = reply.size();
    ToolCall call;
    if (!as_call(trim(reply.substr(body, close - body)), call)) break;
    std::string_view before = reply.substr(pos, open - pos);
    if (pos > 0) before = trim(before);
    while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
    if (!before.empty()) {
      if (!content.empty()) content += '\n';
      content += before;
    }
    out.calls.push_back(std::move(call));
    pos = closed ? close + kCallClose.size() : reply.size();
  }
  if (out.calls.empty()) return {std::string(reply), {}};
  std::string_view after = trim(reply.substr(pos));
  if (!after.empty()) {
    if (!content.empty()) content += '\n';
    content += after;
  }
  out.content = std::move(content);
  return out;
}

// Length of the longest suffix of `s` that is a proper prefix of `word`.
size_t partial_suffix(std::string_view s, std::string_view word) {
  for (size_t n = std::min(s.size(), word.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == word.substr(0, n)) return n;
  }
  return 0;
}

// The tool's parameter schema as a JSON Schema for the whole call object.
ordered_json call_schema(ToolFormat f, const ordered_json& tool, ordered_json& defs) {
  const ordered_json& fn = tool.at("function");
  ordered_json params = fn.contains("parameters") ? fn["parameters"] : ordered_json::object();
  if (params.is_null()) params = ordered_json::object();
  // $refs point at the root's $defs: hoist the tool's own there.
  for (const char* section : {"$defs", "definitions"}) {
    if (!params.is_object() || !params.contains(section)) continue;
    for (const auto& [k, v] : params[section].items()) {
      if (defs.contains(k) && defs[k] != v) {
        throw UsageError(fmt::format("tool '{}': its {} '{}' differs from another tool's",
                                     fn.at("name").get<std::string>(), section, k));
      }
      defs[k] = v;
    }
    params.erase(section);
  }
  if (params.is_object() && params.empty()) params = {{"type", "object"}};
  const char* args_key = f == ToolFormat::kLlama3Json ? "parameters" : "arguments";
  return {{"type", "object"},
          {"properties", {{"name", {{"const", fn.at("name")}}}, {args_key, std::move(params)}}},
          {"required", {"name", args_key}},
          {"additionalProperties", false}};
}

}  // namespace

ToolFormat detect_tool_format(std::string_view t) {
  if (t.find(kCallOpen) != std::string_view::npos) return ToolFormat::kHermes;
  // Llama 3.1+: tool results go to the ipython role, calls are {"name", "parameters"}.
  if (t.find("<|start_header_id|>") != std::string_view::npos &&
      t.find("ipython") != std::string_view::npos &&
      t.find("\"parameters\"") != std::string_view::npos) {
    return ToolFormat::kLlama3Json;
  }
  return ToolFormat::kNone;
}

const char* tool_format_name(ToolFormat f) {
  static constexpr EnumName<ToolFormat> kNames[] = {{ToolFormat::kNone, "none"},
                                                    {ToolFormat::kLlama3Json, "llama3-json"},
                                                    {ToolFormat::kHermes, "hermes"}};
  return enum_name(kNames, f, "none").data();
}

ParsedReply parse_tool_calls(ToolFormat f, std::string_view reply) {
  if (f == ToolFormat::kLlama3Json) return parse_llama3(reply);
  if (f == ToolFormat::kHermes) return parse_hermes(reply);
  return {std::string(reply), {}};
}

size_t tool_text_prefix(ToolFormat f, std::string_view reply) {
  if (f == ToolFormat::kLlama3Json) {
    // A call is the whole reply: decided by its first character that is not blank.
    size_t i = 0;
    while (i < reply.size() && is_space(reply[i])) ++i;
    if (i == reply.size() || reply[i] == '{' || reply[i] == '<') return 0;
    return reply.size();
  }
  if (f == ToolFormat::kHermes) {
    size_t n = reply.find(kCallOpen);
    if (n == std::string_view::npos) n = reply.size() - partial_suffix(reply, kCallOpen);
    while (n > 0 && is_space(reply[n - 1])) --n;
    return n;
  }
  return reply.size();
}

std::string tool_call_grammar(ToolFormat f, const ordered_json& tools, std::string_view only) {
  if (f == ToolFormat::kNone) throw UsageError("the chat template has no tool-call format");
  ordered_json any_of = ordered_json::array();
  ordered_json defs = ordered_json::object();
  for (const auto& tool : tools) {
    const std::string& name = tool.at("function").at("name").get_ref<const std::string&>();
    if (!only.empty() && name != only) continue;
    try {
      any_of.push_back(call_schema(f, tool, defs));
    } catch (const nlohmann::json::exception& e) {
      throw UsageError(fmt::format("tool '{}': {}", name, e.what()));
    }
  }
  if (any_of.empty()) {
    throw UsageError(fmt::format("no tool named '{}' among the request's tools", only));
  }
  ordered_json schema = any_of.size() == 1 ? any_of[0] : ordered_json{{"anyOf", any_of}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  std::string call = json_schema_to_grammar(schema);
  // The schema's start rule becomes the call; the grammar's start wraps it in the format.
  const std::string_view start = "root ::= ";
  if (call.compare(0, start.size(), start) != 0) {
    throw UsageError("internal: the schema grammar does not start with its root rule");
  }
  call.replace(0, start.size(), "tool-call-object ::= ");
  if (f == ToolFormat::kHermes) {
    return "root ::= \"<tool_call>\\n\" tool-call-object \"\\n</tool_call>\"\n" + call;
  }
  return "root ::= tool-call-object\n" + call;
}

}  // namespace hearth::text
