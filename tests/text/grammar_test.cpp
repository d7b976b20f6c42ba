// GBNF grammars: parsing (with errors that name the line), and the matcher over whole texts,
// byte by byte (also inside UTF-8 characters).
#include "hearth/text/grammar.h"

#include <gtest/gtest.h>

#include "hearth/base/error.h"

namespace hearth::text {
namespace {

// Whether `text` is a complete sentence, fed whole and byte by byte.
bool matches(const std::string& grammar, const std::string& text) {
  const auto g = std::make_shared<const Grammar>(parse_grammar(grammar));
  GrammarMatcher whole(g);
  const bool a = whole.accept(text) && whole.complete();
  GrammarMatcher bytes(g);
  bool b = true;
  for (char c : text) b = b && bytes.accept(std::string_view(&c, 1));
  b = b && bytes.complete();
  EXPECT_EQ(a, b) << text;
  return a;
}

TEST(Grammar, LiteralsClassesAndRepetitions) {
  const std::string g = R"(
    # numbers in a list
    root   ::= "[" ws (num ("," ws num)*)? ws "]"
    num    ::= "-"? [0-9]+ ("." [0-9]{1,3})?
    ws     ::= [ \t\n]*
  )";
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1, -2.5,\n 30.125]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[1.2345]"));
  EXPECT_FALSE(matches(g, "[01"));
  EXPECT_FALSE(matches(g, "(1)"));
  EXPECT_TRUE(matches(R"(root ::= "a"{2,3} "b"{2} [^x]?)", "aabb"));
  EXPECT_TRUE(matches(R"(root ::= "a"{2,3} "b"{2} [^x]?)", "aaabbz"));
  EXPECT_FALSE(matches(R"(root ::= "a"{2,3} "b"{2} [^x]?)", "aaaabb"));
  EXPECT_FALSE(matches(R"(root ::= "a"{2,3} "b"{2} [^x]?)", "aabbx"));
  EXPECT_TRUE(matches(R"(root ::= "ab"+ .)", "ababé"));
}

TEST(Grammar, JsonStringsAndUnicode) {
  const std::string g = R"(root ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\"")";
  EXPECT_TRUE(matches(g, R"("héllo \"wörld\" ✓")"));
  EXPECT_FALSE(matches(g, "\"a\nb\""));
  EXPECT_FALSE(matches(g, R"("bad \q")"));
  // A class of code points above ASCII, fed a byte at a time.
  EXPECT_TRUE(matches(R"(root ::= [α-ω]+)", "αβγ"));
  EXPECT_FALSE(matches(R"(root ::= [α-ω]+)", "αbγ"));
  // The first byte of 'é' may start a character in the class; of '€' it cannot.
  const auto g2 = std::make_shared<const Grammar>(parse_grammar(R"(root ::= [à-ÿ])"));
  GrammarMatcher m(g2);
  EXPECT_TRUE(m.allows("\xc3"));
  EXPECT_FALSE(m.allows("\xe2"));
  EXPECT_FALSE(m.allows("\xff"));
}

TEST(Grammar, CompleteAndFinished) {
  const auto g = std::make_shared<const Grammar>(parse_grammar(R"(root ::= "a" "b"?)"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.complete());
  ASSERT_TRUE(m.accept("a"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.finished());  // "b" may still come
  EXPECT_FALSE(m.accept("c"));
  EXPECT_TRUE(m.complete());  // a refused byte leaves the state as it was
  ASSERT_TRUE(m.accept("b"));
  EXPECT_TRUE(m.finished());
  EXPECT_FALSE(m.allows("b"));
}

TEST(Grammar, ErrorsNameTheProblem) {
  struct Case {
    std::string src, what;
  };
  for (const auto& c : std::vector<Case>{
           {"root ::= x", "'x' is used but not defined"},
           {"start ::= \"a\"", "no 'root'"},
           {"root ::= root \"a\"", "left-recursive"},
           {"root ::= e root\ne ::= \"x\"?", "left-recursive"},
           {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
           {"root ::= \"abc", "unterminated"},
           {"root ::= [a-", "unterminated"},
           {"root ::= [z-a]", "backwards"},
           {"root ::= \"\\q\"", "unknown escape"},
           {"root ::= \"a\"{5,2}", "n < m"},
           {"root ::= \"a\"{5000}", "above"},
           {"root ::= * \"a\"", "follows nothing"},
           {"root = \"a\"", "'::='"},
           {"root ::= (\"a\" ", "')'"},
           {"root ::= \"abcdefgh\"{1000}{1000}", "symbols"},
       }) {
    try {
      (void)parse_grammar(c.src);
      ADD_FAILURE() << c.src << " parsed";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(c.what), std::string::npos) << c.src << ": " << e.what();
    }
  }
}

TEST(Grammar, DeepNestingFollowsTheInput) {
  const std::string g = R"g(root ::= "(" root ")" | "x")g";
  EXPECT_TRUE(matches(g, std::string(3000, '(') + "x" + std::string(3000, ')')));
  EXPECT_FALSE(matches(g, std::string(3000, '(') + "x" + std::string(2999, ')')));
}

TEST(Grammar, AmbiguityIsBounded) {
  // Every split of a run of a's is a parse: the stacks are deduplicated, never exponential.
  const auto g = std::make_shared<const Grammar>(parse_grammar(R"(root ::= ("a" | "aa")*)"));
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept(std::string(2000, 'a')));
  EXPECT_TRUE(m.complete());
}

}  // namespace
}  // namespace hearth::text
