// Grammars that constrain generation, in llama.cpp's GBNF notation:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"
//   pair   ::= string ":" ws value
//   string ::= "\"" [^"\\]* "\""
//   ws     ::= [ \t\n]*
//
// Rules are `name ::= alternatives`; an alternative is a sequence of "literals", [character
// classes] (ranges, negation with ^, escapes \n \t \r \\ \" \] \xNN \uNNNN \UNNNNNNNN), rule
// names, (groups), `.` (any character), and the repetitions * + ? {m} {m,} {m,n}. Comments run
// from # to the end of the line. The grammar starts at `root`.
//
// A GrammarMatcher follows the text generated so far (as a set of parse stacks over code
// points, bytes of an incomplete UTF-8 character held) and says which tokens may come next.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hearth::text {

// A parsed grammar: plain data. Repetitions and groups are rewritten into generated rules, so
// every alternative is a sequence of character sets and rule references.
struct Grammar {
  struct CharSet {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive code point ranges
    bool negated = false;
    bool matches(uint32_t cp) const;
    // Whether some code point in [lo, hi] matches (for an incomplete UTF-8 character).
    bool matches_any(uint32_t lo, uint32_t hi) const;
  };
  struct Symbol {
    int rule = -1;  // >= 0: a reference to that rule; else the character set
    CharSet chars;
  };
  using Alternative = std::vector<Symbol>;
  struct Rule {
    std::string name;
    std::vector<Alternative> alternatives;  // an empty alternative matches nothing (epsilon)
  };
  std::vector<Rule> rules;
  int root = -1;
};

// Parses GBNF; FormatError naming the line and what is wrong (undefined rule, no root, left
// recursion, bad escape, ...). Bounded: at most 64 KiB of source and 4096 rules after rewriting.
Grammar parse_grammar(std::string_view source);

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Feeds bytes (any split, also inside a UTF-8 character). False, with the state unchanged,
  // when the grammar cannot continue with them.
  bool accept(std::string_view bytes);
  // Whether `bytes` could come next (accept() without keeping the result).
  bool allows(std::string_view bytes) const;
  // The text so far is a complete sentence of the grammar (generation may end here).
  bool complete() const;
  // No further character can follow (the sentence is complete and cannot grow).
  bool finished() const;

 private:
  struct Pos {
    int rule, alt, index;  // the next symbol is rules[rule].alternatives[alt][index]
    bool operator==(const Pos&) const = default;
  };
  using Stack = std::vector<Pos>;  // back() is the innermost position

  void expand(Stack stack, std::vector<Stack>& out, int depth) const;
  bool step(uint32_t cp, std::vector<Stack>& stacks) const;
  bool feed(std::string_view bytes, std::vector<Stack>& stacks, std::string& partial) const;

  std::shared_ptr<const Grammar> g_;
  std::vector<Stack> stacks_;  // each ends at a character set, or is empty (complete)
  std::string partial_;        // bytes of a UTF-8 character not yet complete
};

}  // namespace hearth::text
