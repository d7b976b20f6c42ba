#include "hearth/text/grammar.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "hearth/base/error.h"
#include "hearth/base/hex.h"
#include "hearth/text/unicode.h"

namespace hearth::text {

namespace {

constexpr size_t kMaxSource = 64 << 10;
constexpr size_t kMaxRules = 4096;
constexpr int kMaxRepeat = 1000;         // m and n of {m,n}
constexpr size_t kMaxSymbols = 1 << 18;  // symbols after rewriting (repetitions copy theirs)
constexpr size_t kMaxStacks = 4096;      // parse stacks alive at once (ambiguity bound)
constexpr int kMaxDepth = 4096;          // rule nesting while expanding one position

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Grammar parse() {
    if (src_.size() > kMaxSource) {
      throw FormatError(fmt::format("grammar: longer than {} bytes", kMaxSource));
    }
    skip(true);
    while (pos_ < src_.size()) {
      const std::string name = parse_name();
      skip(false);
      if (src_.substr(pos_, 3) != "::=") fail(fmt::format("expected '::=' after '{}'", name));
      pos_ += 3;
      const int id = rule_id(name);
      if (defined_[id]) fail(fmt::format("rule '{}' is defined twice", name));
      defined_[id] = true;
      g_.rules[id].alternatives = parse_alternatives(false);
      skip(true);
    }
    for (size_t i = 0; i < g_.rules.size(); ++i) {
      if (!defined_[i]) {
        throw FormatError(
            fmt::format("grammar: rule '{}' is used but not defined", g_.rules[i].name));
      }
    }
    const auto root = names_.find("root");
    if (root == names_.end()) throw FormatError("grammar: no 'root' rule");
    g_.root = root->second;
    check_left_recursion();
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    const size_t line =
        1 + static_cast<size_t>(
                std::count(src_.begin(), src_.begin() + static_cast<std::ptrdiff_t>(pos_), '\n'));
    throw FormatError(fmt::format("grammar line {}: {}", line, what));
  }

  // Blanks and comments; newlines too when `newlines` (between rules, inside groups, after |).
  void skip(bool newlines) {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(src_.substr(start, pos_ - start));
  }

  int rule_id(const std::string& name) {
    auto it = names_.find(name);
    if (it != names_.end()) return it->second;
    return new_rule(name);
  }

  int new_rule(const std::string& name) {
    if (g_.rules.size() >= kMaxRules) {
      fail(fmt::format("more than {} rules (after rewriting repetitions)", kMaxRules));
    }
    const int id = static_cast<int>(g_.rules.size());
    g_.rules.push_back({name, {}});
    defined_.push_back(false);
    names_[name] = id;
    return id;
  }

  // A generated rule (groups and repetitions), defined at once.
  int generated(std::vector<Grammar::Alternative> alts) {
    const int id = new_rule(fmt::format("{}-{}", "_gen", g_.rules.size()));
    g_.rules[id].alternatives = std::move(alts);
    defined_[id] = true;
    return id;
  }

  static Grammar::Symbol ref(int rule) {
    Grammar::Symbol s;
    s.rule = rule;
    return s;
  }

  std::vector<Grammar::Alternative> parse_alternatives(bool nested) {
    std::vector<Grammar::Alternative> alts;
    alts.push_back(parse_sequence(nested));
    while (pos_ < src_.size() && src_[pos_] == '|') {
      ++pos_;
      skip(true);
      alts.push_back(parse_sequence(nested));
    }
    return alts;
  }

  Grammar::Alternative parse_sequence(bool nested) {
    Grammar::Alternative seq;
    size_t last = 0;  // where the last element's symbols start (repetitions apply to it)
    while (true) {
      skip(nested);
      if (pos_ >= src_.size()) break;
      const char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        last = seq.size();
        while (!take_close('"', "unterminated string literal")) {
          const uint32_t cp = parse_char();
          seq.push_back(Grammar::Symbol{});
          seq.back().chars.ranges.emplace_back(cp, cp);
        }
      } else if (c == '[') {
        ++pos_;
        last = seq.size();
        Grammar::Symbol s;
        if (pos_ < src_.size() && src_[pos_] == '^') {
          s.chars.negated = true;
          ++pos_;
        }
        while (!take_close(']', "unterminated character class")) {
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (pos_ + 1 < src_.size() && src_[pos_] == '-' && src_[pos_ + 1] != ']') {
            ++pos_;
            hi = parse_char();
            if (hi < lo) fail("a character range runs backwards");
          }
          s.chars.ranges.emplace_back(lo, hi);
        }
        seq.push_back(std::move(s));
      } else if (c == '.') {
        ++pos_;
        last = seq.size();
        Grammar::Symbol s;
        s.chars.negated = true;  // nothing excluded: any character
        seq.push_back(std::move(s));
      } else if (c == '(') {
        ++pos_;
        skip(true);
        auto alts = parse_alternatives(true);
        skip(true);
        if (pos_ >= src_.size() || src_[pos_] != ')') fail("expected ')'");
        ++pos_;
        last = seq.size();
        seq.push_back(ref(generated(std::move(alts))));
      } else if (is_name_char(c)) {
        // A name followed by ::= starts the next rule: this sequence has ended.
        const size_t save = pos_;
        const std::string name = parse_name();
        skip(false);
        if (src_.substr(pos_, 3) == "::=") {
          pos_ = save;
          break;
        }
        last = seq.size();
        seq.push_back(ref(rule_id(name)));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last >= seq.size()) fail(fmt::format("'{}' follows nothing", c));
        repeat(seq, last);
      } else {
        break;  // '|', ')', newline at top level, or an error the caller reports
      }
    }
    if (pos_ < src_.size() && !nested && src_[pos_] != '\n' && src_[pos_] != '|' &&
        !is_name_char(src_[pos_])) {
      fail(fmt::format("unexpected '{}'", src_[pos_]));
    }
    return seq;
  }

  // Applies the repetition at pos_ to seq[last..]: rewritten into generated rules.
  void repeat(Grammar::Alternative& seq, size_t last) {
    Grammar::Alternative item(seq.begin() + static_cast<std::ptrdiff_t>(last), seq.end());
    seq.resize(last);
    const char c = src_[pos_++];
    int min = 0, max = -1;  // max -1: unbounded
    if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else if (c == '{') {
      min = parse_int();
      max = min;
      if (pos_ < src_.size() && src_[pos_] == ',') {
        ++pos_;
        max = pos_ < src_.size() && src_[pos_] == '}' ? -1 : parse_int();
      }
      if (pos_ >= src_.size() || src_[pos_] != '}') fail("expected '}'");
      ++pos_;
      if (max >= 0 && max < min) fail("{m,n} with n < m");
    }
    // Repetitions copy their item: bound what they may add up to.
    const size_t copies = static_cast<size_t>(min) + static_cast<size_t>(std::max(max - min, 1));
    symbols_ += copies * item.size();
    if (symbols_ > kMaxSymbols)
      fail(fmt::format("more than {} symbols after repetitions", kMaxSymbols));
    for (int i = 0; i < min; ++i) seq.insert(seq.end(), item.begin(), item.end());
    if (max < 0) {
      // star ::= item star | ()
      const int star = generated({});
      Grammar::Alternative more = item;
      more.push_back(ref(star));
      g_.rules[star].alternatives = {std::move(more), {}};
      seq.push_back(ref(star));
    } else if (max > min) {
      // opt_k ::= item opt_{k-1} | (): up to max - min more
      int opt = -1;
      for (int k = 0; k < max - min; ++k) {
        Grammar::Alternative more = item;
        if (opt >= 0) more.push_back(ref(opt));
        opt = generated({std::move(more), {}});
      }
      seq.push_back(ref(opt));
    }
  }

  int parse_int() {
    const size_t start = pos_;
    int v = 0;
    while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = v * 10 + (src_[pos_++] - '0');
      if (v > kMaxRepeat) fail(fmt::format("a repetition count above {}", kMaxRepeat));
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= src_.size()) fail("a \\x, \\u or \\U escape is cut short");
      const int d = hex_digit(src_[pos_++]);
      if (d < 0) fail("a bad hex digit in an escape");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > 0x10ffff) fail("an escape beyond U+10FFFF");
    return v;
  }

  // One character of a literal or class: an escape, or a UTF-8 character.
  // Steps past `close` when it comes next (true); fails with `unterminated` at the end of the
  // source.
  bool take_close(char close, const char* unterminated) {
    if (pos_ >= src_.size()) fail(unterminated);
    if (src_[pos_] != close) return false;
    ++pos_;
    return true;
  }

  uint32_t parse_char() {
    if (src_[pos_] == '\\') {
      if (++pos_ >= src_.size()) fail("a '\\' at the end");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          return '\n';
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
          return static_cast<uint8_t>(e);
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        default:
          fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const int len = utf8_seq_len(static_cast<uint8_t>(src_[pos_]));
    const auto cps = decode_utf8(src_.substr(pos_, static_cast<size_t>(len)));
    if (cps.size() != 1 || cps[0].raw) fail("invalid UTF-8");
    pos_ += static_cast<size_t>(len);
    return cps[0].cp;
  }

  // A rule reachable from itself without consuming a character would make the matcher
  // expand forever: refuse it here.
  void check_left_recursion() const {
    const size_t n = g_.rules.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const auto& alt : g_.rules[r].alternatives) {
          const bool all = std::all_of(alt.begin(), alt.end(), [&](const Grammar::Symbol& s) {
            return s.rule >= 0 && nullable[static_cast<size_t>(s.rule)];
          });
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    // Edges to the rules that can start an alternative; a cycle is left recursion.
    std::vector<std::vector<int>> first(n);
    for (size_t r = 0; r < n; ++r) {
      for (const auto& alt : g_.rules[r].alternatives) {
        for (const auto& s : alt) {
          if (s.rule < 0) break;
          first[r].push_back(s.rule);
          if (!nullable[static_cast<size_t>(s.rule)]) break;
        }
      }
    }
    std::vector<int> state(n, 0);  // 0 new, 1 on the path, 2 done
    for (size_t start = 0; start < n; ++start) {
      if (state[start] != 0) continue;
      std::vector<std::pair<int, size_t>> path{{static_cast<int>(start), 0}};
      state[start] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next == first[static_cast<size_t>(r)].size()) {
          state[static_cast<size_t>(r)] = 2;
          path.pop_back();
          continue;
        }
        const int to = first[static_cast<size_t>(r)][next++];
        if (state[static_cast<size_t>(to)] == 1) {
          throw FormatError(fmt::format("grammar: rule '{}' is left-recursive",
                                        g_.rules[static_cast<size_t>(to)].name));
        }
        if (state[static_cast<size_t>(to)] == 0) {
          state[static_cast<size_t>(to)] = 1;
          path.emplace_back(to, 0);
        }
      }
    }
  }

  std::string_view src_;
  size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, int> names_;
  std::vector<bool> defined_;
  size_t symbols_ = 0;
};

// The smallest and largest code points whose UTF-8 encoding starts with `prefix` (an
// incomplete character); false when no character can start so.
bool prefix_range(std::string_view prefix, uint32_t& lo, uint32_t& hi) {
  const auto lead = static_cast<uint8_t>(prefix[0]);
  const int len = utf8_seq_len(lead);
  if (len < 2 || static_cast<int>(prefix.size()) >= len) return false;
  for (size_t i = 1; i < prefix.size(); ++i) {
    if ((static_cast<uint8_t>(prefix[i]) & 0xc0) != 0x80) return false;
  }
  std::string a(prefix), b(prefix);
  a.append(static_cast<size_t>(len) - prefix.size(), '\x80');
  b.append(static_cast<size_t>(len) - prefix.size(), '\xbf');
  const auto ca = decode_utf8(a), cb = decode_utf8(b);
  if (ca.size() != 1 || cb.size() != 1 || ca[0].raw || cb[0].raw) return false;
  lo = ca[0].cp;
  hi = cb[0].cp;
  return true;
}

}  // namespace

bool Grammar::CharSet::matches(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
  return in != negated;
}

bool Grammar::CharSet::matches_any(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    for (const auto& [a, b] : ranges) {
      if (a <= hi && b >= lo) return true;
    }
    return false;
  }
  // Negated: some code point of [lo, hi] is outside every range.
  std::vector<std::pair<uint32_t, uint32_t>> rs = ranges;
  std::sort(rs.begin(), rs.end());
  uint32_t next = lo;
  for (const auto& [a, b] : rs) {
    if (b < next) continue;
    if (a > next) return true;  // a gap at `next`
    if (b >= hi) return false;
    next = b + 1;
  }
  return next <= hi;
}

Grammar parse_grammar(std::string_view source) {
  return Parser(source).parse();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  const auto& root = g_->rules.at(static_cast<size_t>(g_->root));
  for (size_t a = 0; a < root.alternatives.size(); ++a) {
    expand({{g_->root, static_cast<int>(a), 0}}, stacks_, 0);
  }
}

// Moves `stack` forward to its next character set (expanding rule references, popping
// finished alternatives) and adds the result(s) to `out`.
void GrammarMatcher::expand(Stack stack, std::vector<Stack>& out, int depth) const {
  if (depth > kMaxDepth || out.size() > kMaxStacks) {
    throw UsageError("grammar: too ambiguous (too many ways to continue at once)");
  }
  while (!stack.empty()) {
    const Pos p = stack.back();
    const auto& alt =
        g_->rules[static_cast<size_t>(p.rule)].alternatives[static_cast<size_t>(p.alt)];
    if (p.index == static_cast<int>(alt.size())) {
      stack.pop_back();  // this alternative is done: continue in the one that referenced it
      continue;
    }
    const Grammar::Symbol& s = alt[static_cast<size_t>(p.index)];
    if (s.rule < 0) break;  // a character set: the stack is ready
    stack.back().index++;   // the parent continues after the reference
    // A reference in last place leaves its parent nothing to do: drop the frame now, so that
    // right recursion (every repetition) keeps stacks short instead of one frame per round.
    if (stack.back().index == static_cast<int>(alt.size())) stack.pop_back();
    const auto& target = g_->rules[static_cast<size_t>(s.rule)];
    for (size_t a = 0; a < target.alternatives.size(); ++a) {
      Stack child = stack;
      child.push_back({s.rule, static_cast<int>(a), 0});
      expand(std::move(child), out, depth + 1);
    }
    return;
  }
  if (std::find(out.begin(), out.end(), stack) == out.end()) out.push_back(std::move(stack));
}

bool GrammarMatcher::step(uint32_t cp, std::vector<Stack>& stacks) const {
  std::vector<Stack> next;
  for (const Stack& st : stacks) {
    if (st.empty()) continue;
    const Pos& p = st.back();
    const auto& sym = g_->rules[static_cast<size_t>(p.rule)]
                          .alternatives[static_cast<size_t>(p.alt)][static_cast<size_t>(p.index)];
    if (!sym.chars.matches(cp)) continue;
    Stack moved = st;
    moved.back().index++;
    expand(std::move(moved), next, 0);
  }
  if (next.empty()) return false;
  stacks = std::move(next);
  return true;
}

bool GrammarMatcher::feed(std::string_view bytes, std::vector<Stack>& stacks,
                          std::string& partial) const {
  partial.append(bytes);
  while (!partial.empty()) {
    const int len = utf8_seq_len(static_cast<uint8_t>(partial[0]));
    if (static_cast<int>(partial.size()) < len) {
      // An incomplete character: allowed while some character it may become can come next.
      uint32_t lo, hi;
      if (!prefix_range(partial, lo, hi)) return false;
      for (const Stack& st : stacks) {
        if (st.empty()) continue;
        const Pos& p = st.back();
        const auto& sym =
            g_->rules[static_cast<size_t>(p.rule)]
                .alternatives[static_cast<size_t>(p.alt)][static_cast<size_t>(p.index)];
        if (sym.chars.matches_any(lo, hi)) return true;
      }
      return false;
    }
    const auto cps = decode_utf8(std::string_view(partial).substr(0, static_cast<size_t>(len)));
    if (cps.size() != 1 || cps[0].raw) return false;  // not UTF-8: no grammar takes it
    if (!step(cps[0].cp, stacks)) return false;
    partial.erase(0, static_cast<size_t>(len));
  }
  return true;
}

bool GrammarMatcher::accept(std::string_view bytes) {
  std::vector<Stack> stacks = stacks_;
  std::string partial = partial_;
  if (!feed(bytes, stacks, partial)) return false;
  stacks_ = std::move(stacks);
  partial_ = std::move(partial);
  return true;
}

bool GrammarMatcher::allows(std::string_view bytes) const {
  std::vector<Stack> stacks = stacks_;
  std::string partial = partial_;
  return feed(bytes, stacks, partial);
}

bool GrammarMatcher::complete() const {
  return partial_.empty() &&
         std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

bool GrammarMatcher::finished() const {
  return partial_.empty() &&
         std::all_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace hearth::text
