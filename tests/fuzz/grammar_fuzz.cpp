// libFuzzer target for GBNF grammars (text/grammar.h): the source before the first NUL byte,
// a text after it fed to the matcher in pieces. Any input is a grammar or a FormatError, and
// matching is an answer or a UsageError (too ambiguous), never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/text/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view src = in.substr(0, nul);
  const std::string_view txt = nul == std::string_view::npos ? "" : in.substr(nul + 1);
  try {
    auto g = std::make_shared<const text::Grammar>(text::parse_grammar(src));
    text::GrammarMatcher m(g);
    for (size_t at = 0; at < txt.size(); at += 3) {
      const std::string_view piece = txt.substr(at, 3);
      const bool allowed = m.allows(piece);
      if (m.accept(piece) != allowed) std::abort();  // allows() must predict accept()
      if (!allowed) break;
    }
    if (m.finished() && !m.complete()) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
