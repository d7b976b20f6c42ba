// A Jinja subset, enough for the chat templates stored in GGUF files
// (`tokenizer.chat_template`): {{ }}, {% if/elif/else %}, {% for %} with loop.*,
// {% set %} (also ns.attr), whitespace control ({%- -%}) with trim_blocks and
// lstrip_blocks on (as Hugging Face renders chat templates), filters, tests, slicing,
// namespace(), raise_exception() and the common string and dict methods.
//
// Values are JSON values plus "undefined" and namespaces. Anything outside the subset is
// a FormatError naming the line; raise_exception() in a template is a UsageError carrying
// its message.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace hearth::text::jinja {

struct Node;

class Template {
 public:
  // Parses `source`; FormatError ("chat template line N: ...") when it is not in the subset.
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `context` (a JSON object) as the global variables. Objects keep their key
  // order, as Python dicts do: tojson and items() list keys as the caller gave them.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace hearth::text::jinja
