// libFuzzer target for chat templates, which come inside model files: lexer, parser and
// evaluator on any source, rendered against a small conversation. Errors are hearth::Error;
// the evaluator's budgets (values, output, iterations, time) keep every input bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/text/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  static const nlohmann::ordered_json ctx = {
      {"messages",
       {{{"role", "system"}, {"content", "be brief"}},
        {{"role", "user"}, {"content", "hi <|eot_id|> {{ x }}"}},
        {{"role", "assistant"}, {"content", "hello"}},
        {{"role", "user"}, {"content", "again"}}}},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {}}}}}}}};
  try {
    const text::jinja::Template t(std::string_view(reinterpret_cast<const char*>(data), size));
    const std::string out = t.render(ctx);
    if (out.size() > (16u << 20)) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
