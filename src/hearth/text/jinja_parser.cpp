// Jinja parser: recursive descent with Jinja's precedence, lowest first:
//   a if c else b  <  or  <  and  <  not  <  comparisons / in / not in
//   <  + -  <  ~  <  * / // %  <  **  <  unary - +  <  postfix (. [] () | is).
#include <fmt/core.h>

#include <algorithm>
#include <initializer_list>

#include "hearth/base/error.h"
#include "hearth/text/jinja_ast.h"

namespace hearth::text::jinja {
namespace {

using NodePtr = std::unique_ptr<Node>;

NodePtr make(NodeKind kind, int line, std::string str = {}) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  n->str = std::move(str);
  return n;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  NodePtr parse_template() {
    auto body = parse_body({});
    if (peek().kind != Tok::kEnd) fail("unexpected '{% " + block_keyword() + " %}'");
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(i_ + ahead, t_.size() - 1);
    return t_[i];
  }
  const Token& next() {
    const Token& tok = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return tok;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(fmt::format("chat template line {}: {}", peek().line, what));
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::kOp && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).kind == Tok::kName && peek(ahead).text == name;
  }
  // Steps past the operator or name when it comes next (true).
  bool take_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool take_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!take_op(op)) fail(fmt::format("expected '{}'", op));
  }
  std::string expect_name() {
    if (peek().kind != Tok::kName) fail("expected a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().kind != Tok::kBlockEnd) fail("expected '%}'");
    next();
  }
  // The keyword of the block tag at the cursor ({% keyword ... %}), or "".
  std::string block_keyword() const {
    if (peek().kind != Tok::kBlockBegin || peek(1).kind != Tok::kName) return "";
    return peek(1).text;
  }

  // Statements until a block tag whose keyword is in `stops` (left unconsumed).
  NodePtr parse_body(std::initializer_list<const char*> stops) {
    auto body = make(NodeKind::kBody, peek().line);
    while (peek().kind != Tok::kEnd) {
      const Token& tok = peek();
      if (tok.kind == Tok::kText) {
        body->children.push_back(make(NodeKind::kText, tok.line, tok.text));
        next();
      } else if (tok.kind == Tok::kVarBegin) {
        next();
        auto out = make(NodeKind::kOutput, tok.line);
        out->children.push_back(parse_expr());
        if (peek().kind != Tok::kVarEnd) fail("expected '}}'");
        next();
        body->children.push_back(std::move(out));
      } else if (tok.kind == Tok::kBlockBegin) {
        const std::string kw = block_keyword();
        for (const char* stop : stops)
          if (kw == stop) return body;
        body->children.push_back(parse_block());
      } else {
        fail("unexpected token");
      }
    }
    return body;
  }

  NodePtr parse_block() {
    DepthGuard guard(*this);
    const int line = next().line;  // {%
    const std::string kw = expect_name();
    if (kw == "if") return parse_if(line);
    if (kw == "for") return parse_for(line);
    if (kw == "set") return parse_set(line);
    if (kw == "generation") {  // transformers' marker for assistant spans: renders its body
      expect_block_end();
      auto body = parse_body({"endgeneration"});
      end_block("endgeneration");
      return body;
    }
    fail(fmt::format("'{{% {} %}}' is not supported", kw));
  }

  // Steps past "{% kw" when that block tag comes next (true).
  bool take_block(const char* kw) {
    if (block_keyword() != kw) return false;
    next();
    next();
    return true;
  }

  void end_block(const char* kw) {
    if (!take_block(kw)) fail(fmt::format("expected '{{% {} %}}'", kw));
    expect_block_end();
  }

  // An "{% else %}" body, when there is one (true), appended to `n`'s children, then the
  // block's "{% end %}" tag.
  bool parse_else_and_end(Node& n, const char* end) {
    const bool has_else = take_block("else");
    if (has_else) {
      expect_block_end();
      n.children.push_back(parse_body({end}));
    }
    end_block(end);
    return has_else;
  }

  NodePtr parse_if(int line) {
    auto n = make(NodeKind::kIf, line);
    n->children.push_back(parse_expr());
    expect_block_end();
    n->children.push_back(parse_body({"elif", "else", "endif"}));
    while (take_block("elif")) {
      n->children.push_back(parse_expr());
      expect_block_end();
      n->children.push_back(parse_body({"elif", "else", "endif"}));
    }
    n->flag = parse_else_and_end(*n, "endif");
    return n;
  }

  NodePtr parse_for(int line) {
    auto n = make(NodeKind::kFor, line);
    n->names.push_back(expect_name());
    while (take_op(",")) n->names.push_back(expect_name());
    if (!take_name("in")) fail("expected 'in'");
    n->children.push_back(parse_or());  // no inline if here: "if" filters the loop
    NodePtr cond;
    if (take_name("if")) cond = parse_expr();
    expect_block_end();
    n->children.push_back(parse_body({"else", "endfor"}));
    n->children.push_back(std::move(cond));
    parse_else_and_end(*n, "endfor");
    return n;
  }

  NodePtr parse_set(int line) {
    auto n = make(NodeKind::kSet, line);
    n->names.push_back(expect_name());
    if (take_op(".")) n->attr = expect_name();
    if (!take_op("=")) fail("'{% set %}' blocks are not supported; use '{% set x = ... %}'");
    n->children.push_back(parse_expr());
    expect_block_end();
    return n;
  }

  // Bounds recursion so a hostile template cannot overflow the stack.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail("template is nested too deeply");
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };
  static constexpr int kMaxDepth = 200;

  NodePtr parse_expr() {
    DepthGuard guard(*this);
    auto a = parse_or();
    if (is_name("if")) {
      const int line = next().line;
      auto c = make(NodeKind::kCond, line);
      auto cond = parse_or();
      NodePtr other;
      if (take_name("else")) {
        other = parse_expr();
      }
      c->children.push_back(std::move(a));
      c->children.push_back(std::move(cond));
      c->children.push_back(std::move(other));
      return c;
    }
    return a;
  }

  NodePtr binary(std::string op, NodePtr a, NodePtr b) {
    auto n = make(NodeKind::kBinary, a->line, std::move(op));
    n->children.push_back(std::move(a));
    n->children.push_back(std::move(b));
    return n;
  }

  // One precedence level of left-associative binary operators: `ops` (tokens of `kind`)
  // between operands parsed by `operand`, the next tighter level.
  NodePtr left_assoc(Tok kind, std::initializer_list<const char*> ops,
                     NodePtr (Parser::*operand)()) {
    auto a = (this->*operand)();
    for (;;) {
      const auto op = std::find_if(ops.begin(), ops.end(), [&](const char* o) {
        return peek().kind == kind && peek().text == o;
      });
      if (op == ops.end()) return a;
      next();
      a = binary(*op, std::move(a), (this->*operand)());
    }
  }

  NodePtr parse_or() { return left_assoc(Tok::kName, {"or"}, &Parser::parse_and); }
  NodePtr parse_and() { return left_assoc(Tok::kName, {"and"}, &Parser::parse_not); }
  NodePtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      const int line = next().line;
      auto n = make(NodeKind::kUnary, line, "not");
      n->children.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }
  NodePtr parse_compare() {
    auto a = parse_math1();
    while (true) {
      if (peek().kind == Tok::kOp &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        const std::string op = next().text;
        a = binary(op, std::move(a), parse_math1());
      } else if (take_name("in")) {
        a = binary("in", std::move(a), parse_math1());
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        a = binary("not in", std::move(a), parse_math1());
      } else {
        return a;
      }
    }
  }
  NodePtr parse_math1() { return left_assoc(Tok::kOp, {"+", "-"}, &Parser::parse_concat); }
  NodePtr parse_concat() { return left_assoc(Tok::kOp, {"~"}, &Parser::parse_math2); }
  NodePtr parse_math2() { return left_assoc(Tok::kOp, {"*", "/", "//", "%"}, &Parser::parse_pow); }
  NodePtr parse_pow() { return left_assoc(Tok::kOp, {"**"}, &Parser::parse_unary); }
  NodePtr parse_unary() {
    DepthGuard guard(*this);
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      auto n = make(NodeKind::kUnary, t.line, t.text);
      n->children.push_back(parse_unary());
      return n;
    }
    return parse_postfix(parse_primary());
  }

  // Call arguments after '(' up to ')': positional first, then name=value.
  void parse_args(Node& call) {
    comma_list(")", [&] {
      if (peek().kind == Tok::kName && is_op("=", 1)) {
        call.names.push_back(next().text);
        next();
        call.children.push_back(parse_expr());
      } else {
        if (!call.names.empty()) fail("positional argument after a keyword argument");
        call.children.push_back(parse_expr());
        ++call.n_positional;
      }
    });
  }

  // Items parsed by `item`, separated by commas (one may end the list), up to `close`.
  template <class Item>
  void comma_list(const char* close, Item item) {
    while (!is_op(close)) {
      item();
      if (!take_op(",")) break;
    }
    expect_op(close);
  }

  NodePtr parse_postfix(NodePtr n) {
    while (true) {
      if (take_op(".")) {
        auto a = make(NodeKind::kAttr, n->line, expect_name());
        a->children.push_back(std::move(n));
        n = std::move(a);
      } else if (take_op("[")) {
        NodePtr parts[3];
        int colons = 0;
        while (true) {
          if (is_op(":")) {
            if (++colons > 2) fail("too many ':' in a slice");
            next();
            continue;
          }
          if (is_op("]")) break;
          if (parts[colons]) fail("expected ':' or ']'");
          parts[colons] = parse_expr();
        }
        next();
        if (colons == 0) {
          if (!parts[0]) fail("empty subscript");
          auto idx = make(NodeKind::kIndex, n->line);
          idx->children.push_back(std::move(n));
          idx->children.push_back(std::move(parts[0]));
          n = std::move(idx);
        } else {
          auto sl = make(NodeKind::kSlice, n->line);
          sl->children.push_back(std::move(n));
          for (auto& p : parts) sl->children.push_back(std::move(p));
          n = std::move(sl);
        }
      } else if (take_op("(")) {
        auto call = make(NodeKind::kCall, n->line);
        call->children.push_back(std::move(n));
        parse_args(*call);
        n = std::move(call);
      } else if (take_op("|")) {
        auto f = make(NodeKind::kFilter, n->line, expect_name());
        f->children.push_back(std::move(n));
        if (take_op("(")) {
          parse_args(*f);
        }
        n = std::move(f);
      } else if (take_name("is")) {
        auto t = make(NodeKind::kTest, n->line);
        if (take_name("not")) {
          t->flag = true;
        }
        t->str = expect_name();
        t->children.push_back(std::move(n));
        if (take_op("(")) {
          parse_args(*t);
        } else if (peek().kind == Tok::kString || peek().kind == Tok::kNumber) {
          t->children.push_back(parse_primary());  // "is equalto 3" style
        }
        n = std::move(t);
      } else {
        return n;
      }
    }
  }

  NodePtr parse_primary() {
    const Token& tok = peek();
    switch (tok.kind) {
      case Tok::kString: {
        std::string s = next().text;
        while (peek().kind == Tok::kString) s += next().text;  // adjacent literals join
        auto n = make(NodeKind::kLiteral, tok.line);
        n->value = std::move(s);
        return n;
      }
      case Tok::kNumber: {
        auto n = make(NodeKind::kLiteral, tok.line);
        n->value = next().num;
        return n;
      }
      case Tok::kName: {
        const std::string name = next().text;
        auto n = make(NodeKind::kLiteral, tok.line);
        if (name == "true" || name == "True") {
          n->value = true;
        } else if (name == "false" || name == "False") {
          n->value = false;
        } else if (name == "none" || name == "None") {
          n->value = nullptr;
        } else {
          return make(NodeKind::kName, tok.line, name);
        }
        return n;
      }
      case Tok::kOp:
        if (tok.text == "(") {
          next();
          auto e = parse_expr();
          if (is_op(",")) {  // a tuple: treated as a list
            auto list = make(NodeKind::kList, tok.line);
            list->children.push_back(std::move(e));
            while (take_op(",")) {
              if (is_op(")")) break;
              list->children.push_back(parse_expr());
            }
            e = std::move(list);
          }
          expect_op(")");
          return e;
        }
        if (tok.text == "[") {
          next();
          auto list = make(NodeKind::kList, tok.line);
          comma_list("]", [&] { list->children.push_back(parse_expr()); });
          return list;
        }
        if (tok.text == "{") {
          next();
          auto dict = make(NodeKind::kDict, tok.line);
          comma_list("}", [&] {
            dict->children.push_back(parse_expr());
            expect_op(":");
            dict->children.push_back(parse_expr());
          });
          return dict;
        }
        break;
      default:
        break;
    }
    fail(tok.kind == Tok::kOp ? fmt::format("unexpected '{}'", tok.text)
                              : std::string("expected an expression"));
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

std::unique_ptr<Node> parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parse_template();
}

}  // namespace hearth::text::jinja
