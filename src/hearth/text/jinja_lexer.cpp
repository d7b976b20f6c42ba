// Jinja lexer: template text and tags, with whitespace control applied here so the
// parser sees final text. Rules (as Hugging Face renders chat templates):
//   - one trailing newline of the template is dropped (keep_trailing_newline off);
//   - "{%-" / "{{-" / "{#-" remove all whitespace before the tag, "-%}" etc. after it;
//   - lstrip_blocks: spaces and tabs between a line start and "{%" / "{#" are removed;
//   - trim_blocks: one newline right after "%}" / "#}" is removed.
#include <fmt/core.h>

#include <cctype>

#include "hearth/base/error.h"
#include "hearth/text/jinja_ast.h"

namespace hearth::text::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& what) {
  throw FormatError(fmt::format("chat template line {}: {}", line, what));
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(src) {
    if (!s_.empty() && s_.back() == '\n') s_.remove_suffix(1);
  }

  std::vector<Token> run() {
    std::string text;
    bool strip_next = false;  // "-%}" style: drop leading whitespace of the next text
    bool trim_newline = false;
    while (pos_ < s_.size()) {
      const size_t open = find_open(pos_);
      std::string chunk(s_.substr(pos_, open - pos_));
      if (trim_newline && !chunk.empty() && chunk[0] == '\n') chunk.erase(0, 1);
      if (strip_next) {
        size_t k = 0;
        while (k < chunk.size() && is_space(chunk[k])) ++k;
        chunk.erase(0, k);
      }
      count_lines(pos_, open);
      pos_ = open;
      strip_next = false;
      trim_newline = false;
      if (open >= s_.size()) {
        push_text(std::move(chunk));
        break;
      }
      const char kind = s_[open + 1];  // '{', '%' or '#'
      const bool minus = open + 2 < s_.size() && s_[open + 2] == '-';
      if (minus) {
        while (!chunk.empty() && is_space(chunk.back())) chunk.pop_back();
      } else if (kind == '%' || kind == '#') {
        // lstrip_blocks: only when the tag is the first non-blank thing on its line.
        size_t ws = 0;
        while (ws < open && (s_[open - ws - 1] == ' ' || s_[open - ws - 1] == '\t')) ++ws;
        if (ws == open || s_[open - ws - 1] == '\n') {
          for (size_t k = 0;
               k < ws && !chunk.empty() && (chunk.back() == ' ' || chunk.back() == '\t'); ++k) {
            chunk.pop_back();
          }
        }
      }
      push_text(std::move(chunk));
      pos_ = open + 2 + (minus ? 1 : 0);
      if (kind == '#') {
        const size_t close = s_.find("#}", pos_);
        if (close == std::string_view::npos) fail(line_, "comment is not closed");
        const bool close_minus = close > pos_ && s_[close - 1] == '-';
        count_lines(pos_, close);
        pos_ = close + 2;
        strip_next = close_minus;
        trim_newline = !close_minus;
        continue;
      }
      const bool block = kind == '%';
      tokens_.push_back({block ? Tok::kBlockBegin : Tok::kVarBegin, {}, {}, line_});
      const bool close_minus = lex_expression(block ? '%' : '}');
      tokens_.push_back({block ? Tok::kBlockEnd : Tok::kVarEnd, {}, {}, line_});
      strip_next = close_minus;
      trim_newline = block && !close_minus;
    }
    tokens_.push_back({Tok::kEnd, {}, {}, line_});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i) {
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return s_.size();
  }

  void count_lines(size_t a, size_t b) {
    for (size_t i = a; i < b && i < s_.size(); ++i)
      if (s_[i] == '\n') ++line_;
  }

  void push_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Tok::kText, std::move(text), {}, line_});
  }

  // Tokens up to the closing "%}" or "}}"; returns whether it was "-%}" / "-}}".
  bool lex_expression(char close) {
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) {
        if (s_[pos_] == '\n') ++line_;
        ++pos_;
      }
      if (pos_ >= s_.size())
        fail(line_, close == '%' ? "'{%' is not closed" : "'{{' is not closed");
      const char c = s_[pos_];
      if (c == '-' && pos_ + 2 < s_.size() && s_[pos_ + 1] == close && s_[pos_ + 2] == '}') {
        pos_ += 3;
        return true;
      }
      if (c == close && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}') {
        pos_ += 2;
        return false;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_'))
          ++e;
        tokens_.push_back({Tok::kName, std::string(s_.substr(pos_, e - pos_)), {}, line_});
        pos_ = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "+", "-", "*",
                                           "/",  "%",  "<",  ">",  "~",  "(",  ")", "[", "]",
                                           "{",  "}",  ",",  ".",  ":",  "|",  "="};
        bool found = false;
        for (const char* op : kOps) {
          const std::string_view o(op);
          if (s_.substr(pos_, o.size()) == o) {
            tokens_.push_back({Tok::kOp, std::string(o), {}, line_});
            pos_ += o.size();
            found = true;
            break;
          }
        }
        if (!found) fail(line_, fmt::format("unexpected character '{}'", c));
      }
    }
  }

  void lex_number() {
    size_t e = pos_;
    while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      is_float = true;
      ++e;
      while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
    }
    const std::string lit(s_.substr(pos_, e - pos_));
    Token t{Tok::kNumber, lit, {}, line_};
    try {
      t.num = is_float ? nlohmann::ordered_json(std::stod(lit))
                       : nlohmann::ordered_json(std::stoll(lit));
    } catch (const std::exception&) {
      fail(line_, fmt::format("number '{}' is out of range", lit));
    }
    tokens_.push_back(std::move(t));
    pos_ = e;
  }

  void lex_string(char quote) {
    std::string out;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= s_.size()) fail(line_, "string literal is not closed");
      const char c = s_[i];
      if (c == quote) break;
      if (c == '\\' && i + 1 < s_.size()) {
        const char n = s_[i + 1];
        switch (n) {
          case 'n':
            out += '\n';
            break;
          case 't':
            out += '\t';
            break;
          case 'r':
            out += '\r';
            break;
          case '\\':
            out += '\\';
            break;
          case '\'':
            out += '\'';
            break;
          case '"':
            out += '"';
            break;
          default:
            out += '\\';  // unknown escapes stay as written (Python keeps them)
            out += n;
        }
        i += 2;
        continue;
      }
      if (c == '\n') ++line_;
      out += c;
      ++i;
    }
    tokens_.push_back({Tok::kString, std::move(out), {}, line_});
    pos_ = i + 1;
  }

  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace hearth::text::jinja
