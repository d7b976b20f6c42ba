// The OpenAI request bodies this server accepts, parsed and validated into plain structs.
// Every problem becomes an ApiError carrying the HTTP status and the OpenAI error object
// fields, naming the parameter at fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <memory>

#include "hearth/text/grammar.h"
#include "hearth/text/sampler.h"

namespace hearth::serve {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type = "invalid_request_error",
           std::string param = {}, std::string code = {})
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type, param, code;  // empty param/code render as null
  int retry_after_s = 0;          // > 0: sent as Retry-After (503s)
};

// {"error": {"message", "type", "param", "code"}}
nlohmann::json error_json(const std::string& message, const std::string& type,
                          const std::string& param, const std::string& code);
nlohmann::json error_json(const ApiError& e);

// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationRequest {
  std::string model;  // empty: not given
  // Chat only, non-empty: the conversation as the template gets it ({role, content} and for
  // tool use tool_calls with arguments as objects, tool_call_id, name).
  nlohmann::ordered_json messages;
  std::string prompt;               // completions: prompt text
  std::vector<int32_t> prompt_ids;  // completions: prompt given as token ids
  int32_t max_tokens = -1;          // -1: not given
  text::SamplerParams sampling;
  bool seed_given = false;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;  // extension (as llama.cpp's server)
  int n = 1;                // choices to generate (each its own sequence)
  int logprobs = -1;        // >= 0: report token logprobs with this many top alternatives
  // From response_format (json_object, json_schema) or the "grammar" extension (GBNF).
  std::shared_ptr<const text::Grammar> grammar;
  // Chat: the tools offered (null: none, or tool_choice "none"), and whether a call is forced
  // ("required", or a function named in tool_choice: forced_tool).
  nlohmann::ordered_json tools;
  bool tool_required = false;
  std::string forced_tool;
  // Chat: more variables for the chat template (chat_template_kwargs, e.g. Qwen 3's
  // enable_thinking); null for none.
  nlohmann::ordered_json template_kwargs;
};

// Most chat_template_kwargs entries per request.
inline constexpr size_t kMaxTemplateKwargs = 64;

// Most tools per request.
inline constexpr size_t kMaxTools = 128;

// Most choices per request ('n').
inline constexpr int kMaxChoices = 8;

// Parse a request body; ApiError 400 on malformed JSON or a field of the wrong type/range.
GenerationRequest parse_chat_request(std::string_view body);
GenerationRequest parse_completion_request(std::string_view body);

// Bounds on a request body's JSON: nesting levels, and values (numbers, strings, objects...).
// A prompt given as token ids is one value per token.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonValues = 1 << 18;

// Parses a JSON body that must be an object (ApiError 400 otherwise, also past the bounds).
nlohmann::json parse_body(std::string_view body);

}  // namespace hearth::serve
