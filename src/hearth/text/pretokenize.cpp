#include "hearth/text/pretokenize.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>

#include "hearth/base/error.h"
#include "hearth/text/unicode.h"

namespace hearth::text {

PreTokenizer pre_tokenizer_from_name(std::string_view name) {
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2" || name == "phi-2") {
    return PreTokenizer::kGpt2;
  }
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "dbrx" ||
      name == "smaug-bpe") {
    return PreTokenizer::kLlama3;
  }
  if (name == "qwen2" || name == "deepseek-r1-qwen" || name == "stablelm2") {
    return PreTokenizer::kQwen2;
  }
  if (name == "deepseek-llm") return PreTokenizer::kDeepseekLlm;
  if (name == "deepseek-coder") return PreTokenizer::kDeepseekCoder;
  throw FormatError(fmt::format(
      "tokenizer.ggml.pre '{}' is not supported (gpt-2, llama-bpe, qwen2, deepseek-r1-qwen, "
      "deepseek-llm, deepseek-coder)",
      name));
}

namespace {

// Per code point facts the matchers test. Invalid bytes are symbols: none of the classes.
struct Cp {
  uint32_t cp;
  bool letter;
  bool number;
  bool space;
};

std::vector<Cp> classify(const std::vector<Codepoint>& cps) {
  std::vector<Cp> out;
  out.reserve(cps.size());
  for (const auto& c : cps) {
    if (c.raw) {
      out.push_back({0xFFFFFFFFu, false, false, false});
    } else {
      out.push_back({c.cp, is_letter(c.cp), is_number(c.cp), is_whitespace(c.cp)});
    }
  }
  return out;
}

// A half-open range of code point indices.
using Span = std::pair<size_t, size_t>;

// The GPT-2 and Llama 3 / Qwen 2 expressions are one alternation each, tried left to right
// at the current position; the first alternative that matches wins (leftmost-first, like
// the regex engines the tokenizers were trained with).
class AlternationSplitter {
 public:
  AlternationSplitter(const std::vector<Cp>& cps, size_t begin, size_t end)
      : c_(cps), begin_(begin), end_(end) {}

  // Length of the contraction ('s 't 're 've 'm 'll 'd) at pos, or 0.
  size_t contraction(size_t pos, bool fold_case) const {
    if (cp(pos) != '\'' || pos + 1 >= end_) return 0;
    auto lower = [&](uint32_t v) { return fold_case && v >= 'A' && v <= 'Z' ? v + 32 : v; };
    const uint32_t a = lower(cp(pos + 1));
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end_) return 0;
    const uint32_t b = lower(cp(pos + 2));
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // Whitespace handling shared by both: \s+(?!\S) leaves the last space for the next word
  // when more text follows; a lone or trailing run is taken whole.
  size_t whitespace(size_t pos) const {
    size_t n = 0;
    while (pos + n < end_ && c_[pos + n].space) ++n;
    if (n > 1 && pos + n < end_) return n - 1;
    return n;
  }

  void gpt2(std::vector<Span>& out) const {
    size_t pos = begin_;
    while (pos < end_) {
      size_t len = contraction(pos, false);
      if (len == 0) {
        // ' ?' then one class run: letters, numbers, or anything that is none of those.
        const size_t start = pos + (cp(pos) == ' ' && pos + 1 < end_ ? 1 : 0);
        const Cp& first = c_[start];
        auto run = [&](auto pred) {
          size_t q = start;
          while (q < end_ && pred(c_[q])) ++q;
          return q - pos;
        };
        if (first.letter) {
          len = run([](const Cp& c) { return c.letter; });
        } else if (first.number) {
          len = run([](const Cp& c) { return c.number; });
        } else if (!first.space) {
          len = run([](const Cp& c) { return !c.letter && !c.number && !c.space; });
        } else {
          len = whitespace(pos);
        }
      }
      if (len == 0) len = 1;
      out.emplace_back(pos, pos + len);
      pos += len;
    }
  }

  void llama3(std::vector<Span>& out, size_t max_digits) const {
    size_t pos = begin_;
    while (pos < end_) {
      const Cp& c = c_[pos];
      size_t len = contraction(pos, true);
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (len == 0 && !(c.cp == '\r' || c.cp == '\n' || c.number)) {
        if (c.letter || (pos + 1 < end_ && c_[pos + 1].letter)) {
          size_t q = pos + 1;
          while (q < end_ && c_[q].letter) ++q;
          len = q - pos;
        }
      }
      // \p{N}{1,max_digits}
      if (len == 0 && c.number) {
        size_t q = pos;
        while (q < end_ && c_[q].number && q - pos < max_digits) ++q;
        len = q - pos;
      }
      // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
      if (len == 0) {
        const size_t start = pos + (c.cp == ' ' ? 1 : 0);
        const bool symbol =
            start >= end_ || (!c_[start].space && !c_[start].letter && !c_[start].number);
        if (symbol) {
          size_t q = start;
          while (q < end_ && !c_[q].space && !c_[q].letter && !c_[q].number) ++q;
          while (q < end_ && (c_[q].cp == '\r' || c_[q].cp == '\n')) ++q;
          len = q - pos;
        }
      }
      if (len == 0) {
        // \s*[\r\n]+ : a whitespace run up to and including its last line break.
        size_t n = 0;
        size_t last_break = 0;
        while (pos + n < end_ && c_[pos + n].space) {
          if (c_[pos + n].cp == '\r' || c_[pos + n].cp == '\n') last_break = n + 1;
          ++n;
        }
        len = last_break > 0 ? last_break : whitespace(pos);
      }
      if (len == 0) len = 1;
      out.emplace_back(pos, pos + len);
      pos += len;
    }
  }

 private:
  uint32_t cp(size_t pos) const { return pos < end_ ? c_[pos].cp : 0xFFFFFFFFu; }

  const std::vector<Cp>& c_;
  size_t begin_;
  size_t end_;
};

// One expression of a sequence: the match length at pos (0 = no match), searching
// leftmost-first. Matches and the gaps between them become the new pieces.
using Matcher = std::function<size_t(const std::vector<Cp>&, size_t pos, size_t end)>;

std::vector<Span> split_sequence(const std::vector<Cp>& cps, const std::vector<Span>& pieces,
                                 const Matcher& match) {
  std::vector<Span> out;
  out.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) {
    size_t gap = begin;
    size_t pos = begin;
    while (pos < end) {
      const size_t len = match(cps, pos, end);
      if (len == 0) {
        ++pos;
        continue;
      }
      if (pos > gap) out.emplace_back(gap, pos);
      out.emplace_back(pos, pos + len);
      pos += len;
      gap = pos;
    }
    if (gap < end) out.emplace_back(gap, end);
  }
  return out;
}

struct Range {
  uint32_t lo;
  uint32_t hi;
};

bool in(const Range* ranges, size_t n, uint32_t cp) {
  for (size_t i = 0; i < n; ++i)
    if (cp >= ranges[i].lo && cp <= ranges[i].hi) return true;
  return false;
}

// The cased-letter class of DeepSeek LLM's pre-tokenizer expression (its tokenizer.json),
// as code point ranges.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// ASCII punctuation (and letters: the expression's :-~ range includes them), full-width
// forms, curly quotes and CJK punctuation.
constexpr Range kDeepseekPunct[] = {{0x21, 0x2F},     {0x3A, 0x7E},     {0xFF01, 0xFF0F},
                                    {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002}};
// CJK ideographs, the blocks U+0800..U+4E00 and Hangul syllables.
constexpr Range kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

// In the sequence expressions \s is ASCII whitespace (\t\n\v\f\r and space) plus the
// non-ASCII White_Space code points; the latter match no explicit class (llama.cpp
// rewrites them to \v before matching, so U+3000 is a space here, not punctuation).
bool seq_space(const Cp& c) {
  return c.space && (c.cp < 0x80 ? c.cp != 0x85 : true);
}
bool seq_class(const Cp& c, const Range* r, size_t n) {
  if (c.cp >= 0x80 && c.space) return false;
  return in(r, n, c.cp);
}

size_t optional_space_then_run(const std::vector<Cp>& c, size_t pos, size_t end, const Range* r,
                               size_t n) {
  size_t start = pos;
  if (seq_space(c[pos]) && pos + 1 < end && seq_class(c[pos + 1], r, n)) {
    start = pos + 1;
  } else if (!seq_class(c[pos], r, n)) {
    return 0;
  }
  size_t q = start;
  while (q < end && seq_class(c[q], r, n)) ++q;
  return q - pos;
}

std::vector<Span> deepseek_llm(const std::vector<Cp>& cps) {
  std::vector<Span> pieces{{0, cps.size()}};
  // [\r\n]
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t) {
    return size_t{c[pos].cp == '\r' || c[pos].cp == '\n'};
  });
  // \s?[cased letters]+
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    return optional_space_then_run(c, pos, end, kDeepseekLetters, std::size(kDeepseekLetters));
  });
  // \s?[punctuation]+
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    return optional_space_then_run(c, pos, end, kDeepseekPunct, std::size(kDeepseekPunct));
  });
  // \s+$ : the whitespace run that ends the piece.
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    for (size_t q = pos; q < end; ++q)
      if (!seq_space(c[q])) return size_t{0};
    return end - pos;
  });
  // [CJK]+
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    size_t q = pos;
    while (q < end && seq_class(c[q], kDeepseekCjk, std::size(kDeepseekCjk))) ++q;
    return q - pos;
  });
  // \p{N}+
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    size_t q = pos;
    while (q < end && c[q].number) ++q;
    return q - pos;
  });
  return pieces;
}

std::vector<Span> deepseek_coder(const std::vector<Cp>& cps) {
  std::vector<Span> pieces{{0, cps.size()}};
  // [\r\n]
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t) {
    return size_t{c[pos].cp == '\r' || c[pos].cp == '\n'};
  });
  // \s?\p{L}+ and \s?\p{P}+
  auto space_then = [](auto pred) {
    return [pred](const std::vector<Cp>& c, size_t pos, size_t end) -> size_t {
      size_t start = pos;
      if (seq_space(c[pos]) && pos + 1 < end && pred(c[pos + 1])) {
        start = pos + 1;
      } else if (!pred(c[pos])) {
        return 0;
      }
      size_t q = start;
      while (q < end && pred(c[q])) ++q;
      return q - pos;
    };
  };
  pieces = split_sequence(cps, pieces, space_then([](const Cp& c) { return c.letter; }));
  pieces = split_sequence(cps, pieces, space_then([](const Cp& c) {
                            return !c.space && c.cp != 0xFFFFFFFFu && is_punctuation(c.cp);
                          }));
  // [CJK]+
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t end) {
    size_t q = pos;
    while (q < end && seq_class(c[q], kDeepseekCjk, std::size(kDeepseekCjk))) ++q;
    return q - pos;
  });
  // \p{N}: one digit per piece
  pieces = split_sequence(cps, pieces, [](const std::vector<Cp>& c, size_t pos, size_t) {
    return size_t{c[pos].number};
  });
  return pieces;
}

}  // namespace

std::vector<std::pair<uint32_t, uint32_t>> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<Codepoint> decoded = decode_utf8(text);
  const std::vector<Cp> cps = classify(decoded);
  std::vector<Span> spans;
  AlternationSplitter splitter(cps, 0, cps.size());
  switch (kind) {
    case PreTokenizer::kGpt2:
      splitter.gpt2(spans);
      break;
    case PreTokenizer::kLlama3:
      splitter.llama3(spans, 3);
      break;
    case PreTokenizer::kQwen2:
      splitter.llama3(spans, 1);
      break;
    case PreTokenizer::kDeepseekLlm:
      spans = deepseek_llm(cps);
      break;
    case PreTokenizer::kDeepseekCoder:
      spans = deepseek_coder(cps);
      break;
  }
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(spans.size());
  for (const auto& [b, e] : spans) {
    const uint32_t begin = decoded[b].begin;
    const uint32_t end = decoded[e - 1].begin + decoded[e - 1].len;
    out.emplace_back(begin, end);
  }
  return out;
}

}  // namespace hearth::text
