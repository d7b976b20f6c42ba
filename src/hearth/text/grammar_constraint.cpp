#include "hearth/text/grammar_constraint.h"

#include <array>
#include <limits>

namespace hearth::text {

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     const Tokenizer& tokenizer)
    : tok_(tokenizer), matcher_(std::move(grammar)) {}

size_t GrammarConstraint::mask(std::span<float> logits) const {
  // Most tokens fail on their first byte: ask the matcher about each byte value once.
  std::array<int8_t, 256> first{};  // 0 unknown, 1 allowed, -1 refused
  const float none = -std::numeric_limits<float>::infinity();
  size_t left = 0;
  const bool can_end = matcher_.complete();
  for (size_t id = 0; id < logits.size() && id < tok_.n_vocab(); ++id) {
    const auto tid = static_cast<int32_t>(id);
    bool ok;
    if (tok_.is_eog(tid)) {
      ok = can_end;
    } else {
      const std::string bytes = tok_.token_to_bytes(tid, /*special=*/false);
      if (bytes.empty()) {
        ok = false;  // control tokens carry no text the grammar could take
      } else {
        int8_t& f = first[static_cast<uint8_t>(bytes[0])];
        if (f == 0) f = matcher_.allows(std::string_view(bytes.data(), 1)) ? 1 : -1;
        ok = f > 0 && (bytes.size() == 1 || matcher_.allows(bytes));
      }
    }
    if (ok) {
      ++left;
    } else {
      logits[id] = none;
    }
  }
  for (size_t id = tok_.n_vocab(); id < logits.size(); ++id) logits[id] = none;
  return left;
}

bool GrammarConstraint::accept(int32_t id) {
  if (tok_.is_eog(id)) return matcher_.complete();
  return matcher_.accept(tok_.token_to_bytes(id, false));
}

}  // namespace hearth::text
