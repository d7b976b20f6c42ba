#include "hearth/text/tokenizer.h"

#include <fmt/core.h>

#include <algorithm>
#include <optional>
#include <queue>
#include <type_traits>

#include "hearth/base/error.h"
#include "hearth/text/unicode.h"

namespace hearth::text {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// A piece of the input: raw text to tokenize, or a special token already recognised.
struct Fragment {
  bool is_token = false;
  TokenId id = -1;
  size_t begin = 0;  // byte range in the input when !is_token
  size_t len = 0;
};

// A symbol in the merge linked list: a byte range of the working string.
struct Symbol {
  int prev = -1;
  int next = -1;
  size_t begin = 0;
  size_t len = 0;  // 0 once merged into its left neighbour
};

std::vector<Symbol> split_chars(std::string_view s) {
  std::vector<Symbol> syms;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t len = std::min<size_t>(utf8_seq_len(static_cast<uint8_t>(s[pos])), s.size() - pos);
    const int idx = static_cast<int>(syms.size());
    syms.push_back({idx - 1, idx + 1, pos, len});
    pos += len;
  }
  if (!syms.empty()) syms.back().next = -1;
  return syms;
}

void merge_into_left(std::vector<Symbol>& syms, int left, int right) {
  syms[left].len += syms[right].len;
  syms[right].len = 0;
  syms[left].next = syms[right].next;
  if (syms[right].next >= 0) syms[syms[right].next].prev = left;
}

// Merges adjacent symbols of `text`, best pair first, until no pair may merge (SentencePiece by
// score, BPE by merge rank). `rank(left, right)` is nullopt for a pair that may not merge, else
// its rank, the lower the better; on ties the leftmost pair goes first.
template <class Rank>
void merge_pairs(std::vector<Symbol>& syms, Rank&& rank) {
  using Key = typename std::invoke_result_t<Rank&, int, int>::value_type;
  struct Pair {
    Key key;
    int left;
    int right;
    size_t len;
  };
  // The queue pops its greatest element, so "greater" here means worse.
  auto worse = [](const Pair& a, const Pair& b) {
    return a.key > b.key || (a.key == b.key && a.left > b.left);
  };
  std::priority_queue<Pair, std::vector<Pair>, decltype(worse)> queue(worse);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (const auto key = rank(left, right)) {
      queue.push({*key, left, right, syms[left].len + syms[right].len});
    }
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    const Symbol& l = syms[p.left];
    const Symbol& r = syms[p.right];
    // Stale entries: a side was merged away or grew since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != p.len) continue;
    merge_into_left(syms, p.left, p.right);
    try_add(syms[p.left].prev, p.left);
    try_add(p.left, syms[p.left].next);
  }
}

}  // namespace

Tokenizer::Tokenizer(VocabData vocab, std::string source) : vocab_(std::move(vocab)) {
  validate_vocab(vocab_, source);
  spm_ = vocab_.model == "llama";
  if (!spm_) {
    pre_ = pre_tokenizer_from_name(vocab_.pre);
    ignore_merges_ = pre_ == PreTokenizer::kLlama3;
  }
  const size_t n = vocab_.tokens.size();
  token_to_id_.reserve(n);
  // A later duplicate wins, as in llama.cpp.
  for (size_t i = 0; i < n; ++i) token_to_id_[vocab_.tokens[i]] = static_cast<TokenId>(i);
  for (size_t r = 0; r < vocab_.merges.size(); ++r) {
    const std::string& m = vocab_.merges[r];
    // The separator is the first space after the first byte (a left part never is empty).
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      throw FormatError(
          fmt::format("{}: tokenizer.ggml.merges[{}] '{}' has no space", source, r, m));
    }
    merge_rank_.emplace(m, static_cast<int>(r));  // first occurrence keeps the best rank
  }
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = type(static_cast<TokenId>(i));
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !vocab_.tokens[i].empty()) {
      special_.push_back(static_cast<TokenId>(i));
    }
  }
  std::stable_sort(special_.begin(), special_.end(), [&](TokenId a, TokenId b) {
    return vocab_.tokens[a].size() > vocab_.tokens[b].size();
  });
  byte_token_.assign(256, -1);
  if (spm_) {
    for (int b = 0; b < 256; ++b) {
      if (auto id = find(fmt::format("<0x{:02X}>", b))) {
        byte_token_[b] = *id;
      } else if (auto raw = find(std::string(1, static_cast<char>(b)))) {
        byte_token_[b] = *raw;
      }
    }
  }
  for (TokenId id : {vocab_.eos_id, vocab_.eot_id})
    if (id >= 0) eog_.push_back(id);
  for (const char* text : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                           "<|eom_id|>", "<EOT>"}) {
    if (auto id = find(text)) eog_.push_back(*id);
  }
}

TokenType Tokenizer::type(TokenId id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.tokens.size()) {
    throw UsageError(fmt::format("token id {} is outside the vocabulary ({})", id, n_vocab()));
  }
  return vocab_.token_types.empty() ? TokenType::kNormal : vocab_.token_types[id];
}

const std::string& Tokenizer::piece(TokenId id) const {
  type(id);  // range check
  return vocab_.tokens[id];
}

std::optional<TokenId> Tokenizer::find(std::string_view piece) const {
  auto it = token_to_id_.find(piece);
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::is_eog(TokenId id) const {
  return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  // 1. Cut special tokens out of the text, longest token text first.
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({false, -1, 0, text.size()});
  for (TokenId id : special_) {
    const TokenType t = type(id);
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& st = vocab_.tokens[id];
    std::vector<Fragment> next;
    next.reserve(frags.size());
    for (const Fragment& f : frags) {
      if (f.is_token) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.begin;
      const size_t end = f.begin + f.len;
      while (pos < end) {
        const size_t hit = text.substr(0, end).find(st, pos);
        if (hit == std::string_view::npos) break;
        if (hit > pos) next.push_back({false, -1, pos, hit - pos});
        next.push_back({true, id, 0, 0});
        pos = hit + st.size();
      }
      if (pos < end) next.push_back({false, -1, pos, end - pos});
    }
    frags = std::move(next);
  }

  // 2. Tokenize the raw fragments.
  std::vector<TokenId> out;
  if (add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  bool prev_special = true;  // "llama": a prefix space at the start and after special tokens
  for (const Fragment& f : frags) {
    if (f.is_token) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.len);
    if (spm_) {
      std::string escaped;
      escaped.reserve(raw.size() * 3 + 3);
      if (vocab_.add_space_prefix && prev_special) escaped += kSpmSpace;
      for (char c : raw) {
        if (c == ' ') {
          escaped += kSpmSpace;
        } else {
          escaped += c;
        }
      }
      encode_spm(escaped, out);
    } else {
      for (const auto& [b, e] : pre_tokenize(pre_, raw)) encode_bpe_word(raw.substr(b, e - b), out);
    }
    prev_special = false;
  }
  if (add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

void Tokenizer::spm_byte_fallback(std::string_view text, std::vector<TokenId>& out) const {
  for (char c : text) {
    const TokenId id = byte_token_[static_cast<uint8_t>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    } else {
      throw FormatError(fmt::format("vocabulary has no byte token <0x{:02X}> and no unknown token",
                                    static_cast<uint8_t>(c)));
    }
  }
}

void Tokenizer::encode_spm(std::string_view text, std::vector<TokenId>& out) const {
  std::vector<Symbol> syms = split_chars(text);
  // Highest score first: the rank is the score negated.
  merge_pairs(syms, [&](int left, int right) -> std::optional<float> {
    const auto id = find(text.substr(syms[left].begin, syms[left].len + syms[right].len));
    if (!id) return std::nullopt;
    return vocab_.scores.empty() ? 0.0f : -vocab_.scores[*id];
  });
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view s = text.substr(syms[i].begin, syms[i].len);
    if (auto id = find(s)) {
      out.push_back(*id);
    } else {
      spm_byte_fallback(s, out);
    }
  }
}

int Tokenizer::bpe_rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void Tokenizer::encode_bpe_word(std::string_view word, std::vector<TokenId>& out) const {
  std::string mapped;  // the word in GPT-2's byte alphabet
  mapped.reserve(word.size() * 2);
  for (char c : word) mapped += byte_to_unicode(static_cast<uint8_t>(c));
  if (ignore_merges_) {
    if (auto id = find(mapped)) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<Symbol> syms = split_chars(mapped);
  const std::string_view m = mapped;
  merge_pairs(syms, [&](int left, int right) -> std::optional<int> {
    const int rank = bpe_rank(m.substr(syms[left].begin, syms[left].len),
                              m.substr(syms[right].begin, syms[right].len));
    if (rank < 0) return std::nullopt;
    return rank;
  });
  for (int i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    const std::string_view s = m.substr(syms[i].begin, syms[i].len);
    if (auto id = find(s)) {
      out.push_back(*id);
      continue;
    }
    // No token for the symbol: llama.cpp falls back to single-byte tokens of its text.
    for (char c : s) {
      if (auto id = find(std::string_view(&c, 1))) out.push_back(*id);
    }
  }
}

std::string Tokenizer::token_to_bytes(TokenId id, bool special) const {
  const TokenType t = type(id);
  const std::string& text = vocab_.tokens[id];
  if (t == TokenType::kControl || t == TokenType::kUnknown) {
    if (!special) return {};
    return text;
  }
  if (t == TokenType::kUserDefined) return text;
  if (spm_) {
    if (t == TokenType::kByte) {
      // "<0xXX>"
      auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
      };
      if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>' && hex(text[3]) >= 0 &&
          hex(text[4]) >= 0) {
        return std::string(1, static_cast<char>(hex(text[3]) * 16 + hex(text[4])));
      }
      return text;  // a byte token whose text is not <0xXX>: show it as written
    }
    if (t != TokenType::kNormal) return {};
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpmSpace.size(), kSpmSpace) == 0) {
        out += ' ';
        i += kSpmSpace.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }
  if (t != TokenType::kNormal) return {};
  std::string out;
  out.reserve(text.size());
  for (const Codepoint& c : decode_utf8(text)) {
    const int b = c.raw ? -1 : unicode_to_byte(c.cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text, c.begin, c.len);  // outside the byte alphabet: keep as written
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, bool special,
                              bool strip_leading_space) const {
  std::string out;
  bool first = true;
  for (TokenId id : ids) {
    std::string piece = token_to_bytes(id, special);
    if (first && !piece.empty()) {
      if (strip_leading_space && spm_ && vocab_.add_space_prefix && piece[0] == ' ') {
        piece.erase(0, 1);
      }
      first = false;
    }
    out += piece;
  }
  return out;
}

std::string StreamDecoder::push(TokenId id) {
  pending_ += tok_.token_to_bytes(id, special_);
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  const size_t n = pending_.size();
  size_t i = 0;
  while (i < n) {
    const auto lead = static_cast<uint8_t>(pending_[i]);
    if (lead < 0x80) {
      out += pending_[i++];
      continue;
    }
    const size_t len = static_cast<size_t>(utf8_seq_len(lead));
    if (len == 1) {  // a continuation byte with no lead, or a byte that never leads
      out += kReplacement;
      ++i;
      continue;
    }
    size_t k = 1;
    while (k < len && i + k < n && (static_cast<uint8_t>(pending_[i + k]) & 0xC0) == 0x80) ++k;
    if (k < len && i + k == n) break;  // the character may still complete: hold it
    if (k < len) {
      out += kReplacement;  // broken sequence
      i += k;
      continue;
    }
    const std::string_view seq = std::string_view(pending_).substr(i, len);
    const auto cps = decode_utf8(seq);
    if (cps.size() == 1 && !cps[0].raw) {
      out += seq;
    } else {
      out += kReplacement;  // overlong form, surrogate or past U+10FFFF
    }
    i += len;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) out = "\xEF\xBF\xBD";  // U+FFFD for the unfinished character
  pending_.clear();
  return out;
}

}  // namespace hearth::text
