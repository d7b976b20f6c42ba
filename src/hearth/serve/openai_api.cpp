#include "hearth/serve/openai_api.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "hearth/base/error.h"
#include "hearth/text/chat.h"
#include "hearth/text/json_schema.h"

namespace hearth::serve {

using nlohmann::json;

namespace {

constexpr size_t kMaxStops = 16;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw ApiError(400, message, "invalid_request_error", param, "invalid_value");
}

double number(const json& j, const char* key, double lo, double hi) {
  const json& v = j.at(key);
  if (!v.is_number()) bad(key, fmt::format("'{}' must be a number", key));
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) bad(key, fmt::format("'{}' must be between {} and {}", key, lo, hi));
  return d;
}

int64_t integer(const json& j, const char* key, int64_t lo, int64_t hi) {
  const json& v = j.at(key);
  if (!v.is_number_integer()) bad(key, fmt::format("'{}' must be an integer", key));
  // Unsigned values above int64 range arrive as number_unsigned.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    bad(key, fmt::format("'{}' must be between {} and {}", key, lo, hi));
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) bad(key, fmt::format("'{}' must be between {} and {}", key, lo, hi));
  return i;
}

bool boolean(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
  return v.get<bool>();
}

// Present and not null.
bool has(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// Fields this server does not know are accepted and ignored: clients send many that do not
// change what is generated (user, store, metadata, parallel_tool_calls, service_tier, ...).
// Fields that would change the output and are not implemented: refused, named, so that a
// client never takes an answer that ignored them for one that honoured them.
constexpr const char* kUnsupportedFields[] = {
    "functions", "function_call", "audio",   "modalities",  "prediction",
    "suffix",    "echo",          "best_of", "json_schema",
};

void refuse_unsupported(const json& j) {
  for (const char* key : kUnsupportedFields) {
    if (!has(j, key)) continue;
    if (std::string_view(key) == "echo" && j[key] == false) continue;
    if (std::string_view(key) == "best_of" && j[key] == 1) continue;
    throw ApiError(400, fmt::format("'{}' is not supported by this server yet", key),
                   "invalid_request_error", key, "unsupported_parameter");
  }
}

// logit_bias: {"token id": bias in [-100, 100]}; ids are checked against the vocabulary later.
void parse_logit_bias(const json& j, GenerationRequest& r) {
  const json& b = j["logit_bias"];
  if (!b.is_object()) bad("logit_bias", "'logit_bias' must be an object of token id: bias");
  if (b.size() > 1024) bad("logit_bias", "'logit_bias' has more than 1024 entries");
  for (auto it = b.begin(); it != b.end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    if (!key.empty() && key.size() <= 10 &&
        key.find_first_not_of("0123456789") == std::string::npos) {
      id = std::stoll(key);
    }
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id", key.substr(0, 32)));
    }
    const json& v = it.value();
    if (!v.is_number() || !(v.get<double>() >= -100 && v.get<double>() <= 100)) {
      bad("logit_bias", fmt::format("'logit_bias' of token {} must be between -100 and 100", id));
    }
    r.sampling.logit_bias.emplace_back(static_cast<int32_t>(id), v.get<float>());
  }
}

// response_format (json_object; json_schema, whose schema is read again from the body with its
// key order kept: properties are generated in that order) and "grammar" (GBNF).
void parse_grammar_fields(const json& j, std::string_view body, GenerationRequest& r) {
  std::string source;
  const char* param = "grammar";
  if (has(j, "response_format")) {
    param = "response_format";
    const json& rf = j["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) {
      bad(param, "'response_format' must be an object with a 'type'");
    }
    const std::string type = rf["type"].get<std::string>();
    try {
      if (type == "json_object") {
        source = text::json_object_grammar();
      } else if (type == "json_schema") {
        const auto ordered = nlohmann::ordered_json::parse(body);
        const auto& js = ordered["response_format"]["json_schema"];
        if (!js.is_object() || !js.contains("schema")) {
          bad("response_format.json_schema", "'response_format.json_schema.schema' is required");
        }
        source = text::json_schema_to_grammar(js["schema"]);
      } else if (type != "text") {
        bad("response_format.type", fmt::format("'response_format.type' is '{}': expected text, "
                                                "json_object or json_schema",
                                                type.substr(0, 32)));
      }
    } catch (const UsageError& e) {
      bad("response_format", e.what());
    }
  }
  if (has(j, "grammar")) {
    if (!source.empty())
      bad("grammar", "'grammar' and a JSON 'response_format' exclude each other");
    if (!j["grammar"].is_string()) bad("grammar", "'grammar' must be a string (GBNF)");
    source = j["grammar"].get<std::string>();
    param = "grammar";
  }
  if (source.empty()) return;
  try {
    r.grammar = std::make_shared<const text::Grammar>(text::parse_grammar(source));
  } catch (const FormatError& e) {
    bad(param, e.what());
  }
}

void parse_common(const json& j, GenerationRequest& r) {
  refuse_unsupported(j);
  // OpenAI's defaults: temperature 1, top_p 1, no top-k, no min-p.
  r.sampling.temperature = 1.0f;
  r.sampling.top_p = 1.0f;
  r.sampling.top_k = 0;
  r.sampling.min_p = 0.0f;
  r.sampling.penalty_last_n = 64;
  if (has(j, "model")) {
    if (!j["model"].is_string()) bad("model", "'model' must be a string");
    r.model = j["model"].get<std::string>();
  }
  if (has(j, "temperature"))
    r.sampling.temperature = static_cast<float>(number(j, "temperature", 0, 2));
  if (has(j, "top_p")) r.sampling.top_p = static_cast<float>(number(j, "top_p", 0, 1));
  if (has(j, "top_k")) r.sampling.top_k = static_cast<int32_t>(integer(j, "top_k", 0, 1 << 20));
  if (has(j, "min_p")) r.sampling.min_p = static_cast<float>(number(j, "min_p", 0, 1));
  if (has(j, "repeat_penalty")) {
    r.sampling.repeat_penalty = static_cast<float>(number(j, "repeat_penalty", 0, 100));
  }
  if (has(j, "frequency_penalty")) {
    r.sampling.frequency_penalty = static_cast<float>(number(j, "frequency_penalty", -2, 2));
  }
  if (has(j, "presence_penalty")) {
    r.sampling.presence_penalty = static_cast<float>(number(j, "presence_penalty", -2, 2));
  }
  // max_completion_tokens is the newer name for chat; either is accepted.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (has(j, key)) r.max_tokens = static_cast<int32_t>(integer(j, key, 1, 1 << 24));
  }
  if (has(j, "seed")) {
    r.sampling.seed = static_cast<uint64_t>(integer(j, "seed", std::numeric_limits<int64_t>::min(),
                                                    std::numeric_limits<int64_t>::max()));
    r.seed_given = true;
  }
  if (has(j, "n")) r.n = static_cast<int>(integer(j, "n", 1, kMaxChoices));
  if (has(j, "logit_bias")) parse_logit_bias(j, r);
  if (has(j, "stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > kMaxStops)
        bad("stop", fmt::format("'stop' has more than {} strings", kMaxStops));
      for (const auto& e : s) {
        if (!e.is_string()) bad("stop", "'stop' must be a string or a list of strings");
        r.stop.push_back(e.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or a list of strings");
    }
  }
  if (has(j, "stream")) r.stream = boolean(j, "stream");
  if (has(j, "stream_options")) {
    const json& so = j["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (has(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) {
        bad("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
      }
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  if (has(j, "ignore_eos")) r.ignore_eos = boolean(j, "ignore_eos");
}

// Message content: a string, or a list of {"type": "text", "text": ...} parts (joined).
std::string message_content(const json& c, size_t i) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (c.is_null()) return {};
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(param, fmt::format("'{}' must be a string or a list of parts", param));
  std::string out;
  for (const auto& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      bad(param, fmt::format("'{}': only text parts ({{\"type\": \"text\", \"text\": ...}}) are "
                             "supported",
                             param));
    }
    out += part["text"].get<std::string>();
  }
  return out;
}

// One message as the template gets it. `ordered` is the same message with its key order
// (null when the request uses no tools).
nlohmann::ordered_json chat_message(const json& msg, const nlohmann::ordered_json* ordered,
                                    size_t i) {
  const std::string param = fmt::format("messages[{}]", i);
  if (!msg.is_object()) bad(param, fmt::format("'{}' must be an object", param));
  if (!msg.contains("role") || !msg["role"].is_string()) {
    bad(param + ".role", fmt::format("'{}.role' must be a string", param));
  }
  const std::string role = msg["role"].get<std::string>();
  if (role != "system" && role != "user" && role != "assistant" && role != "developer" &&
      role != "tool") {
    bad(param + ".role", fmt::format("'{}.role' is '{}': expected system, developer, user, "
                                     "assistant or tool",
                                     param, role.substr(0, 32)));
  }
  nlohmann::ordered_json out = {{"role", role == "developer" ? "system" : role}};
  const bool calls = role == "assistant" && has(msg, "tool_calls");
  // An assistant turn that only calls tools has no content (null, as clients send it).
  if (calls && !has(msg, "content")) {
    out["content"] = nullptr;
  } else {
    out["content"] = message_content(msg.contains("content") ? msg["content"] : json(), i);
  }
  if (calls) {
    const std::string p = param + ".tool_calls";
    const auto& list = (*ordered)["tool_calls"];
    if (!list.is_array()) bad(p, fmt::format("'{}' must be a list", p));
    nlohmann::ordered_json tc = nlohmann::ordered_json::array();
    for (size_t k = 0; k < list.size(); ++k) {
      const std::string pk = fmt::format("{}[{}]", p, k);
      const auto& call = list[k];
      if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
          !call["function"].contains("name") || !call["function"]["name"].is_string()) {
        bad(pk, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\", "
                            "\"arguments\"}}}}",
                            pk));
      }
      const auto& fn = call["function"];
      // Templates write the arguments with tojson: give them the object, not its text.
      nlohmann::ordered_json args = nlohmann::ordered_json::object();
      if (fn.contains("arguments") && fn["arguments"].is_string()) {
        args = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, false);
        if (args.is_discarded()) {
          bad(pk + ".function.arguments",
              fmt::format("'{}.function.arguments' is not valid JSON", pk));
        }
      } else if (fn.contains("arguments") && fn["arguments"].is_object()) {
        args = fn["arguments"];
      } else if (has(fn, "arguments")) {
        bad(pk + ".function.arguments",
            fmt::format("'{}.function.arguments' must be a string of JSON", pk));
      }
      nlohmann::ordered_json c = {{"type", "function"},
                                  {"function", {{"name", fn["name"]}, {"arguments", args}}}};
      if (call.contains("id") && call["id"].is_string()) c["id"] = call["id"];
      tc.push_back(std::move(c));
    }
    out["tool_calls"] = std::move(tc);
  }
  for (const char* key : {"tool_call_id", "name"}) {
    if (!has(msg, key)) continue;
    if (!msg[key].is_string())
      bad(param + "." + key, fmt::format("'{}.{}' must be a string", param, key));
    out[key] = msg[key];
  }
  return out;
}

// {"type": "function", ...}: a "type" member that is the string "function".
template <typename Json>
bool is_function_type(const Json& o) {
  const auto it = o.find("type");
  return it != o.end() && it->is_string() && *it == "function";
}

// tools: [{"type": "function", "function": {"name", "description", "parameters"}}], and
// tool_choice: "none" (the tools are left out), "auto", "required", or
// {"type": "function", "function": {"name": ...}}.
void parse_tools(const json& j, const nlohmann::ordered_json& ordered, GenerationRequest& r) {
  if (!has(j, "tools")) {
    if (has(j, "tool_choice") && j["tool_choice"] != "none" && j["tool_choice"] != "auto") {
      bad("tool_choice", "'tool_choice' needs 'tools'");
    }
    return;
  }
  const auto& tools = ordered["tools"];
  if (!tools.is_array()) bad("tools", "'tools' must be a list");
  if (tools.size() > kMaxTools)
    bad("tools", fmt::format("'tools' has more than {} tools", kMaxTools));
  std::vector<std::string> names;
  for (size_t k = 0; k < tools.size(); ++k) {
    const std::string p = fmt::format("tools[{}]", k);
    const auto& t = tools[k];
    // Every member's type is checked before use: json::value() throws on a wrong type.
    if (!t.is_object() || !is_function_type(t) || !t.contains("function") ||
        !t["function"].is_object()) {
      bad(p, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{...}}}}", p));
    }
    const auto& fn = t["function"];
    const auto name = fn.find("name");
    if (name == fn.end() || !name->is_string() || name->get_ref<const std::string&>().empty() ||
        name->get_ref<const std::string&>().size() > 64 ||
        name->get_ref<const std::string&>().find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
            std::string::npos) {
      bad(p + ".function.name",
          fmt::format("'{}.function.name' must be 1 to 64 letters, digits, '_', '-' or '.'", p));
    }
    if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null()) {
      bad(p + ".function.parameters", fmt::format("'{}.function.parameters' must be an object", p));
    }
    if (fn.contains("description") && !fn["description"].is_string()) {
      bad(p + ".function.description",
          fmt::format("'{}.function.description' must be a string", p));
    }
    names.push_back(name->get<std::string>());
  }
  std::string choice = "auto";
  if (has(j, "tool_choice")) {
    const json& c = j["tool_choice"];
    if (c.is_string()) {
      choice = c.get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        bad("tool_choice", fmt::format("'tool_choice' is '{}': expected none, auto, required or "
                                       "{{\"type\": \"function\", \"function\": {{\"name\"}}}}",
                                       choice.substr(0, 32)));
      }
    } else if (c.is_object() && is_function_type(c) && c.contains("function") &&
               c["function"].is_object() && c["function"].contains("name") &&
               c["function"]["name"].is_string()) {
      r.forced_tool = c["function"]["name"].get<std::string>();
      if (std::find(names.begin(), names.end(), r.forced_tool) == names.end()) {
        bad("tool_choice", fmt::format("'tool_choice' names '{}', which is not among the tools",
                                       r.forced_tool.substr(0, 64)));
      }
      choice = "required";
    } else {
      bad("tool_choice",
          "'tool_choice' must be none, auto, required or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}");
    }
  }
  if (choice == "none" || tools.empty()) return;
  r.tools = tools;
  r.tool_required = choice == "required";
  if (r.tool_required && r.grammar) {
    bad("tool_choice",
        "a required tool call and 'response_format' or 'grammar' exclude each other");
  }
}

}  // namespace

json error_json(const std::string& message, const std::string& type, const std::string& param,
                const std::string& code) {
  json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}};
}

json error_json(const ApiError& e) {
  return error_json(e.what(), e.type, e.param, e.code);
}

namespace {

// A first pass over the body that only counts: values and nesting. (nlohmann's callback
// parser cannot do it: it rescans the enclosing container at each object's end.)
struct JsonBounds : nlohmann::json_sax<json> {
  size_t values = 0;
  int depth = 0;
  bool too_deep = false, too_many = false;

  bool value() {
    too_many = ++values > kMaxJsonValues;
    return !too_many;
  }
  bool open() {
    too_deep = ++depth > kMaxJsonDepth;
    return !too_deep && value();
  }
  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override {
    --depth;
    return true;
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override {
    --depth;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace

json parse_body(std::string_view body) {
  // A DOM costs tens of bytes per value and recursion per level: bound both before one is
  // built, so that a body of many tiny values or deep nesting is refused cheaply.
  JsonBounds bounds;
  json::sax_parse(body, &bounds, json::input_format_t::json, /*strict=*/true,
                  /*ignore_comments=*/false);
  if (bounds.too_deep) {
    throw ApiError(400,
                   fmt::format("the request body is nested deeper than {} levels", kMaxJsonDepth),
                   "invalid_request_error", {}, "invalid_json");
  }
  if (bounds.too_many) {
    throw ApiError(400,
                   fmt::format("the request body holds more than {} JSON values", kMaxJsonValues),
                   "invalid_request_error", {}, "invalid_json");
  }
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw ApiError(400, "the request body is not valid JSON", "invalid_request_error", {},
                   "invalid_json");
  }
  if (!j.is_object()) {
    throw ApiError(400, "the request body must be a JSON object", "invalid_request_error", {},
                   "invalid_json");
  }
  return j;
}

GenerationRequest parse_chat_request(std::string_view body) {
  const json j = parse_body(body);
  GenerationRequest r;
  parse_common(j, r);
  parse_grammar_fields(j, body, r);
  // Chat: "logprobs": true, "top_logprobs": 0..20 alternatives (which needs logprobs).
  if (has(j, "logprobs") && boolean(j, "logprobs")) r.logprobs = 0;
  if (has(j, "top_logprobs")) {
    const int top = static_cast<int>(integer(j, "top_logprobs", 0, 20));
    if (r.logprobs < 0) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = top;
  }
  if (!has(j, "messages")) bad("messages", "'messages' is required");
  const json& m = j["messages"];
  if (!m.is_array()) bad("messages", "'messages' must be a list");
  if (m.empty()) bad("messages", "'messages' must not be empty");
  // Tool schemas and call arguments keep their key order in the prompt: read them again
  // with it when there are any.
  bool tool_use = has(j, "tools");
  for (const auto& msg : m) tool_use = tool_use || (msg.is_object() && has(msg, "tool_calls"));
  const nlohmann::ordered_json ordered =
      tool_use ? nlohmann::ordered_json::parse(body) : nlohmann::ordered_json();
  r.messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m.size(); ++i) {
    r.messages.push_back(chat_message(m[i], tool_use ? &ordered["messages"][i] : nullptr, i));
  }
  parse_tools(j, ordered, r);
  if (has(j, "chat_template_kwargs")) {
    const json& k = j["chat_template_kwargs"];
    if (!k.is_object()) bad("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    if (k.size() > kMaxTemplateKwargs) {
      bad("chat_template_kwargs",
          fmt::format("'chat_template_kwargs' has more than {} entries", kMaxTemplateKwargs));
    }
    for (auto it = k.begin(); it != k.end(); ++it) {
      if (text::is_reserved_chat_variable(it.key())) {
        bad("chat_template_kwargs",
            fmt::format("'chat_template_kwargs' may not set '{}': the server sets it", it.key()));
      }
    }
    r.template_kwargs = nlohmann::ordered_json::parse(k.dump());
  }
  return r;
}

GenerationRequest parse_completion_request(std::string_view body) {
  const json j = parse_body(body);
  GenerationRequest r;
  for (const char* key : {"tools", "tool_choice", "chat_template_kwargs"}) {
    if (has(j, key)) {
      throw ApiError(400, fmt::format("'{}' is for /v1/chat/completions", key),
                     "invalid_request_error", key, "unsupported_parameter");
    }
  }
  parse_common(j, r);
  parse_grammar_fields(j, body, r);
  // Completions: "logprobs": 0..5 alternatives per token.
  if (has(j, "logprobs")) r.logprobs = static_cast<int>(integer(j, "logprobs", 0, 5));
  if (!has(j, "prompt")) bad("prompt", "'prompt' is required");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    for (const auto& e : p) {
      if (!e.is_number_integer()) bad("prompt", "'prompt' token ids must be integers");
      const int64_t id = e.get<int64_t>();
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        bad("prompt", "'prompt' has a bad token id");
      r.prompt_ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    bad("prompt", "'prompt' must be a string, a list of one string, or a list of token ids");
  }
  return r;
}

}  // namespace hearth::serve
