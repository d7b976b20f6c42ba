// Chat prompts: renders a conversation with a model's chat template (Jinja, jinja.h) or a
// built-in one chosen by name (`--chat-template NAME`).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

struct VocabData;

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

// Renders `tmpl` with the variables chat templates expect: messages (role, content),
// add_generation_prompt, bos_token, eos_token. FormatError when the template is outside
// the supported subset (the message names the line), UsageError when the template itself
// rejects the conversation (raise_exception).
std::string render_chat(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, std::string_view bos_token,
                        std::string_view eos_token);

// The same with the conversation as OpenAI clients send it: `messages` is a list of
// {role, content, and for tool use tool_calls (arguments as JSON objects), tool_call_id,
// name}; `tools` the request's list of {"type": "function", "function": {...}}, or null for
// none (then `tools` is left undefined, as templates expect). Key order is kept. `extra`: more
// variables (an object, e.g. {"enable_thinking": false}; null for none), which may not
// redefine the ones above (UsageError naming the key).
std::string render_chat(std::string_view tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        std::string_view bos_token, std::string_view eos_token,
                        const nlohmann::ordered_json& extra = nullptr);

// The variables render_chat sets itself, which `extra` may not name.
bool is_reserved_chat_variable(std::string_view name);

// Built-in templates: "llama2", "llama3", "chatml", "deepseek-r1". nullopt for other names.
std::optional<std::string_view> builtin_chat_template(std::string_view name);
std::vector<std::string_view> builtin_chat_template_names();

// The template to use: the built-in `name` when given (UsageError listing the names when
// unknown), else the vocabulary's tokenizer.chat_template (UsageError when it has none).
std::string select_chat_template(std::string_view name, const VocabData& vocab);

}  // namespace hearth::text
