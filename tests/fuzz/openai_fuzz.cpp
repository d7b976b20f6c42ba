// libFuzzer target for what a client's JSON body reaches: the OpenAI request parsers, then
// the chat messages rendered through a built-in chat template. Any input is a request or an
// ApiError (a template error is an Error); nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/serve/openai_api.h"
#include "hearth/text/chat.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  static const auto names = text::builtin_chat_template_names();
  try {
    (void)serve::parse_completion_request(body);
  } catch (const serve::ApiError& e) {
    if (e.status != 400) std::abort();
  }
  try {
    const serve::GenerationRequest r = serve::parse_chat_request(body);
    if (r.messages.empty()) std::abort();
    const auto tmpl = text::builtin_chat_template(names[size % names.size()]);
    (void)text::render_chat(*tmpl, r.messages, true, "<s>", "</s>");
  } catch (const serve::ApiError& e) {
    if (e.status != 400) std::abort();
  } catch (const Error&) {
    // a template refusing the messages (roles out of order, ...)
  }
  return 0;
}
