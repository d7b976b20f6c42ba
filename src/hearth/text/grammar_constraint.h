// Generation held to a grammar: before each sampling step the tokens that cannot continue the
// text are masked out of the logits; end-of-generation tokens only once the text is a
// complete sentence. Used by the server (response_format, grammar) and by `hearth run
// --grammar / --json-schema`.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hearth/text/grammar.h"
#include "hearth/text/tokenizer.h"

namespace hearth::text {

class GrammarConstraint {
 public:
  // `tokenizer` must outlive the constraint.
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, const Tokenizer& tokenizer);

  // Sets the logits of tokens that may not come next to -infinity. Returns how many remain.
  size_t mask(std::span<float> logits) const;
  // Follows a sampled token; false if the grammar refuses it (it was not masked).
  bool accept(int32_t id);
  // The text so far is a whole sentence / cannot grow any further.
  bool complete() const { return matcher_.complete(); }
  bool finished() const { return matcher_.finished(); }

 private:
  const Tokenizer& tok_;
  GrammarMatcher matcher_;
};

}  // namespace hearth::text
