// Internal: tokens and syntax tree of the Jinja subset (jinja.h).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace hearth::text::jinja {

enum class Tok {
  kText,        // literal template text
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,
  kNumber,  // text holds the literal; value in `num`
  kOp,      // punctuation / operator, text holds it
  kEnd,
};

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  nlohmann::ordered_json num;  // kNumber: integer or float
  int line = 1;
};

// Splits a template into tokens, applying whitespace control. FormatError on bad syntax.
std::vector<Token> lex(std::string_view source);

enum class NodeKind {
  // statements
  kBody,    // children: statements in order
  kText,    // str
  kOutput,  // children[0]: expression
  kIf,      // children: cond, body, [cond, body]..., [else body]; flag has_else
  kFor,     // names: loop vars; children: iterable, body, [filter cond or null], [else body]
  kSet,     // names[0] (and optional str attr); children[0]: value
  // expressions
  kLiteral,  // value
  kName,     // str
  kList,     // children
  kDict,     // children: k0, v0, k1, v1, ...
  kAttr,     // children[0] . str
  kIndex,    // children[0] [ children[1] ]
  kSlice,    // children[0] [ c1 : c2 : c3 ] (null child = omitted)
  kCall,     // children[0]( children[1..] ), kwargs in names (parallel to trailing children)
  kFilter,   // str = filter name; children[0] = input; children[1..] args
  kTest,     // str = test name; flag = negated; children[0] input, children[1..] args
  kUnary,    // str = op ("not", "-", "+"); children[0]
  kBinary,   // str = op; children[0], children[1]
  kCond,     // a if cond else b: children[0]=a, [1]=cond, [2]=b (may be null)
};

struct Node {
  NodeKind kind = NodeKind::kBody;
  int line = 0;
  std::string str;
  std::string attr;                // kSet: attribute of a namespace (set ns.attr = ...)
  std::vector<std::string> names;  // kFor loop vars; kCall keyword names
  size_t n_positional = 0;         // kCall: arguments before the keyword ones
  bool flag = false;
  nlohmann::ordered_json value;
  std::vector<std::unique_ptr<Node>> children;
};

std::unique_ptr<Node> parse(const std::vector<Token>& tokens);

}  // namespace hearth::text::jinja
