// Text <-> token ids for "llama" (SentencePiece-style) and "gpt2" (byte-level BPE)
// vocabularies, matching llama.cpp's tokenizer on the same vocabulary.
//
// encode: special/control tokens are cut out of the text first (longest text first), then
// each remaining fragment is tokenized:
//   llama: spaces become U+2581 (plus one leading space at the start and after a special
//          token when add_space_prefix), symbols are UTF-8 characters, adjacent pairs that
//          form a token merge highest score first (leftmost on ties); leftovers become
//          <0xXX> byte tokens.
//   gpt2:  pre-tokenizer words (pretokenize.h), bytes mapped to GPT-2's printable alphabet,
//          adjacent pairs merge by lowest merge rank first (leftmost on ties).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hearth/text/pretokenize.h"
#include "hearth/text/vocab.h"

namespace hearth::text {

using TokenId = int32_t;

class Tokenizer {
 public:
  // Validates `vocab` (FormatError naming the field when inconsistent).
  explicit Tokenizer(VocabData vocab, std::string source = "<vocab>");

  // add_special: BOS/EOS as the vocabulary's add_bos/add_eos flags say.
  // parse_special: control tokens written in the text become their ids (user-defined
  // tokens always do, as in llama.cpp).
  std::vector<TokenId> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;

  // Bytes a token stands for. Control and unknown tokens give "" unless `special`.
  std::string token_to_bytes(TokenId id, bool special = false) const;
  // Concatenated bytes of `ids` (may end in an incomplete UTF-8 character). With
  // `strip_leading_space`, a "llama" vocabulary's added prefix space is removed.
  std::string decode(std::span<const TokenId> ids, bool special = false,
                     bool strip_leading_space = true) const;

  const VocabData& vocab() const { return vocab_; }
  size_t n_vocab() const { return vocab_.tokens.size(); }
  const std::string& piece(TokenId id) const;  // raw token text; UsageError when out of range
  std::optional<TokenId> find(std::string_view piece) const;
  TokenType type(TokenId id) const;
  TokenId bos() const { return vocab_.bos_id; }
  TokenId eos() const { return vocab_.eos_id; }
  TokenId eot() const { return vocab_.eot_id; }
  // End of generation: EOS, EOT or another end-of-turn token.
  bool is_eog(TokenId id) const;

 private:
  void encode_spm(std::string_view text, std::vector<TokenId>& out) const;
  void encode_bpe_word(std::string_view word, std::vector<TokenId>& out) const;
  void spm_byte_fallback(std::string_view text, std::vector<TokenId>& out) const;
  int bpe_rank(std::string_view left, std::string_view right) const;

  VocabData vocab_;
  bool spm_ = true;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  bool ignore_merges_ = false;  // llama-bpe: a word that is a token is taken whole
  // Transparent hashing: lookups by string_view without building a std::string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;
  StringMap<TokenId> token_to_id_;
  StringMap<int> merge_rank_;     // "left right" -> rank
  std::vector<TokenId> special_;  // matched in text, longest first
  std::vector<TokenId> eog_;
  std::vector<TokenId> byte_token_;  // (256) i32 "llama": id of <0xXX> (or the byte), -1
};

// Turns a stream of token ids into text that is always valid UTF-8: bytes of a character
// split across tokens are held until the character completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool special = false)
      : tok_(tokenizer), special_(special) {}
  // The text that became complete with `id` (possibly empty).
  std::string push(TokenId id);
  // Whatever is still held; incomplete characters become U+FFFD.
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool special_;
  std::string pending_;  // bytes of an incomplete UTF-8 character
};

}  // namespace hearth::text
