#include "hearth/text/chat.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "hearth/base/error.h"
#include "hearth/text/jinja.h"
#include "hearth/text/vocab.h"

namespace hearth::text {
namespace {

// Hearth's own renderings of the common prompt formats, written for this interpreter.
// They produce the same text as the models' published templates for plain
// system/user/assistant conversations (tests/text/chat_test.cpp checks that).
constexpr std::string_view kLlama2 = R"({%- if messages and messages[0].role == 'system' -%}
  {%- set system = messages[0].content -%}{%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system = none -%}{%- set turns = messages -%}
{%- endif -%}
{%- for m in turns -%}
  {%- if (m.role == 'user') != (loop.index0 % 2 == 0) -%}
    {{- raise_exception('llama2 chat: roles must alternate user/assistant') -}}
  {%- endif -%}
  {%- set text = m.content -%}
  {%- if loop.first and system is not none -%}
    {%- set text = '<<SYS>>\n' ~ system ~ '\n<</SYS>>\n\n' ~ text -%}
  {%- endif -%}
  {%- if m.role == 'user' -%}
    {{- bos_token ~ '[INST] ' ~ text.strip() ~ ' [/INST]' -}}
  {%- else -%}
    {{- ' ' ~ text.strip() ~ ' ' ~ eos_token -}}
  {%- endif -%}
{%- endfor -%})";

constexpr std::string_view kLlama3 = R"({%- for m in messages -%}
  {%- if loop.first -%}{{- bos_token -}}{%- endif -%}
  {{- '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ (m.content | trim) ~ '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%})";

constexpr std::string_view kChatml = R"({%- for m in messages -%}
  {{- '<|im_start|>' ~ m.role ~ '\n' ~ m.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%})";

// DeepSeek-R1: the system prompt goes first, bare; earlier answers lose their reasoning
// (text up to </think>); the generation prompt opens a <think> block.
constexpr std::string_view kDeepseekR1 = R"({%- set ns = namespace(system='') -%}
{%- for m in messages -%}
  {%- if m.role == 'system' -%}{%- set ns.system = m.content -%}{%- endif -%}
{%- endfor -%}
{{- bos_token ~ ns.system -}}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}
    {{- '<｜User｜>' ~ m.content -}}
  {%- elif m.role == 'assistant' -%}
    {%- set text = m.content -%}
    {%- if '</think>' in text -%}{%- set text = text.split('</think>')[-1] -%}{%- endif -%}
    {{- '<｜Assistant｜>' ~ text ~ '<｜end▁of▁sentence｜>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<｜Assistant｜><think>\n' -}}{%- endif -%})";

struct Builtin {
  std::string_view name;
  std::string_view source;
};
constexpr Builtin kBuiltins[] = {
    {"llama2", kLlama2}, {"llama3", kLlama3}, {"chatml", kChatml}, {"deepseek-r1", kDeepseekR1}};

}  // namespace

std::string render_chat(std::string_view tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt, std::string_view bos_token,
                        std::string_view eos_token) {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  return render_chat(tmpl, msgs, nullptr, add_generation_prompt, bos_token, eos_token);
}

bool is_reserved_chat_variable(std::string_view name) {
  for (const char* v : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (name == v) return true;
  }
  return false;
}

std::string render_chat(std::string_view tmpl, const nlohmann::ordered_json& messages,
                        const nlohmann::ordered_json& tools, bool add_generation_prompt,
                        std::string_view bos_token, std::string_view eos_token,
                        const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json ctx = {{"messages", messages},
                                {"add_generation_prompt", add_generation_prompt},
                                {"bos_token", std::string(bos_token)},
                                {"eos_token", std::string(eos_token)}};
  if (!tools.is_null()) ctx["tools"] = tools;
  if (!extra.is_null()) {
    if (!extra.is_object()) throw UsageError("chat template variables must be an object");
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      if (is_reserved_chat_variable(it.key())) {
        throw UsageError("chat template variable '" + it.key() + "' is set by hearth itself");
      }
      ctx[it.key()] = it.value();
    }
  }
  return jinja::Template(tmpl).render(ctx);
}

std::optional<std::string_view> builtin_chat_template(std::string_view name) {
  for (const auto& b : kBuiltins)
    if (b.name == name) return b.source;
  return std::nullopt;
}

std::vector<std::string_view> builtin_chat_template_names() {
  std::vector<std::string_view> out;
  for (const auto& b : kBuiltins) out.push_back(b.name);
  return out;
}

std::string select_chat_template(std::string_view name, const VocabData& vocab) {
  if (!name.empty()) {
    if (auto t = builtin_chat_template(name)) return std::string(*t);
    throw UsageError(
        fmt::format("unknown chat template '{}' (built-in: llama2, llama3, chatml, "
                    "deepseek-r1)",
                    name));
  }
  if (vocab.chat_template.empty()) {
    throw UsageError(
        "the model has no tokenizer.chat_template; pick one with --chat-template "
        "llama2|llama3|chatml|deepseek-r1");
  }
  return vocab.chat_template;
}

}  // namespace hearth::text
