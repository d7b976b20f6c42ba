// libFuzzer target for what a client's JSON body reaches: the OpenAI request parsers, then
// the chat messages rendered through a built-in chat template, a grammar for the request's
// tools, and the body read as a model's reply that may hold tool calls. Any input is a request or
// an ApiError (a template error is an Error); nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/serve/openai_api.h"
#include "hearth/text/chat.h"
#include "hearth/text/grammar.h"
#include "hearth/text/tool_calls.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  static const auto names = text::builtin_chat_template_names();
  try {
    (void)serve::parse_completion_request(body);
  } catch (const serve::ApiError& e) {
    if (e.status != 400) std::abort();
  }
  nlohmann::ordered_json tools;
  try {
    const serve::GenerationRequest r = serve::parse_chat_request(body);
    if (r.messages.empty()) std::abort();
    const auto tmpl = text::builtin_chat_template(names[size % names.size()]);
    tools = r.tools;
    (void)text::render_chat(*tmpl, r.messages, r.tools, true, "<s>", "</s>");
  } catch (const serve::ApiError& e) {
    if (e.status != 400) std::abort();
  } catch (const Error&) {
    // a template refusing the messages (roles out of order, ...)
  }
  // Tool calls: the grammar for a request's tools, and replies parsed back. The text a stream
  // sends early must be where the whole reply's text starts.
  for (auto f : {text::ToolFormat::kLlama3Json, text::ToolFormat::kHermes}) {
    const text::ParsedReply reply = text::parse_tool_calls(f, body);
    const size_t early = text::tool_text_prefix(f, body);
    if (reply.content.compare(0, early, body.substr(0, early)) != 0) std::abort();
    try {
      if (!tools.is_null()) (void)text::parse_grammar(text::tool_call_grammar(f, tools, ""));
    } catch (const Error&) {
    }
  }
  return 0;
}
