// Tokenizer tests on tiny hand-built vocabularies: every expected id sequence below is
// derived by hand from the merge rules (comments show the steps).
#include "hearth/text/tokenizer.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/gguf/gguf_writer.h"
#include "hearth/text/unicode.h"

namespace hearth::text {
namespace {

const std::string kSp = "\xE2\x96\x81";  // U+2581

// SentencePiece-style: <unk> <s> </s>, 256 byte tokens, then scored pieces.
VocabData spm_vocab() {
  VocabData v;
  v.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    v.tokens.push_back(std::move(text));
    v.scores.push_back(score);
    v.token_types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::kByte);
  add(kSp, -1, TokenType::kNormal);          // 259
  add("h", -1, TokenType::kNormal);          // 260
  add("e", -1, TokenType::kNormal);          // 261
  add("l", -1, TokenType::kNormal);          // 262
  add("o", -1, TokenType::kNormal);          // 263
  add("he", -2, TokenType::kNormal);         // 264
  add("ll", -3, TokenType::kNormal);         // 265
  add("lo", -1.5, TokenType::kNormal);       // 266
  add(kSp + "he", -4, TokenType::kNormal);   // 267
  add("llo", -5, TokenType::kNormal);        // 268
  add("<tag>", 0, TokenType::kUserDefined);  // 269
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

TEST(SpmTokenizer, MergesHighestScoreFirst) {
  const Tokenizer tok(spm_vocab());
  // "▁hello": pairs in vocab he(-2) ll(-3) lo(-1.5). lo wins -> ▁ h e l lo; then he(-2)
  // -> ▁ he l lo; ll is stale (its right l was merged); ▁he(-4) -> ▁he l lo; llo(-5)
  // -> ▁he llo.
  EXPECT_EQ(tok.encode("hello"), (std::vector<TokenId>{1, 267, 268}));
  EXPECT_EQ(tok.encode("hello", false), (std::vector<TokenId>{267, 268}));
}

TEST(SpmTokenizer, ByteFallbackForUnknownCharacters) {
  const Tokenizer tok(spm_vocab());
  // "▁hi": no pair is a token; 'i' (0x69) and 'é' (C3 A9) fall back to byte tokens 3+b.
  EXPECT_EQ(tok.encode("hi", false), (std::vector<TokenId>{259, 260, 3 + 0x69}));
  EXPECT_EQ(tok.encode("é", false), (std::vector<TokenId>{259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode("hé hello", true)), "hé hello");
}

TEST(SpmTokenizer, SpecialTokensAndPrefixSpace) {
  const Tokenizer tok(spm_vocab());
  // Control token parsed: a prefix space is added again after it.
  EXPECT_EQ(tok.encode("h</s>h", false, true), (std::vector<TokenId>{259, 260, 2, 259, 260}));
  // Not parsed: "</s>" is text ('<' '/' 's' '>' as byte tokens).
  const auto raw = tok.encode("</s>", false, false);
  EXPECT_EQ(raw, (std::vector<TokenId>{259, 3 + '<', 3 + '/', 3 + 's', 3 + '>'}));
  // User-defined tokens are matched even without parse_special.
  EXPECT_EQ(tok.encode("<tag>", false, false), (std::vector<TokenId>{269}));
  EXPECT_EQ(tok.decode(std::vector<TokenId>{1, 267, 268, 2}), "hello");
  EXPECT_EQ(tok.decode(std::vector<TokenId>{1, 267, 268, 2}, true, false), "<s> hello</s>");
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(1));
}

TEST(SpmTokenizer, AddEosAndEmptyText) {
  VocabData v = spm_vocab();
  v.add_eos = true;
  const Tokenizer tok(v);
  EXPECT_EQ(tok.encode(""), (std::vector<TokenId>{1, 2}));
  EXPECT_EQ(tok.encode("", false), std::vector<TokenId>{});
}

// Byte-level BPE: all 256 byte tokens (ids 0..255 in byte order) plus merged tokens.
VocabData bpe_vocab(std::vector<std::string> merges, std::string pre = "gpt-2") {
  VocabData v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
  for (const auto& m : merges) {
    const size_t sp = m.find(' ');
    v.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
  }
  v.merges = std::move(merges);
  v.tokens.push_back("<|endoftext|>");
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  v.token_types.back() = TokenType::kControl;
  v.eos_id = static_cast<TokenId>(v.tokens.size() - 1);
  return v;
}

TEST(BpeTokenizer, MergesLowestRankFirst) {
  // Ranks: 0 "h e"->256, 1 "l l"->257, 2 "he ll"->258, 3 "Ġ w"->259, 4 "o r"->260,
  // 5 "hell o"->261.
  const Tokenizer tok(bpe_vocab({"h e", "l l", "he ll", "\xC4\xA0 w", "o r", "hell o"}));
  // "hello": h e l l o -> he l l o (0) -> he ll o (1) -> hell o (2) -> hello (5).
  // " world" (Ġworld): Ġw o r l d (3) -> Ġw or l d (4).
  EXPECT_EQ(tok.encode("hello world", false), (std::vector<TokenId>{261, 259, 260, 'l', 'd'}));
  EXPECT_EQ(tok.decode(tok.encode("hello world", false)), "hello world");
}

TEST(BpeTokenizer, EqualRanksMergeLeftmostFirst) {
  const Tokenizer tok(bpe_vocab({"a a"}));
  // "aaa": (a0,a1) and (a1,a2) both rank 0; the leftmost merges, leaving "aa" "a".
  EXPECT_EQ(tok.encode("aaa", false), (std::vector<TokenId>{256, 'a'}));
  EXPECT_EQ(tok.encode("aaaa", false), (std::vector<TokenId>{256, 256}));
}

TEST(BpeTokenizer, IgnoreMergesTakesWholeWordsForLlama3) {
  // "abc" is a token but no merge chain reaches it: gpt-2 rules cannot produce it,
  // llama-bpe takes the whole word.
  VocabData v = bpe_vocab({"a b"});
  v.tokens.insert(v.tokens.end() - 1, "abc");
  v.token_types.insert(v.token_types.end() - 1, TokenType::kNormal);
  v.eos_id += 1;
  const TokenId abc = static_cast<TokenId>(v.tokens.size() - 2);
  EXPECT_EQ(Tokenizer(v).encode("abc", false), (std::vector<TokenId>{256, 'c'}));
  v.pre = "llama-bpe";
  EXPECT_EQ(Tokenizer(v).encode("abc", false), (std::vector<TokenId>{abc}));
}

TEST(BpeTokenizer, ControlTokensSplitTheText) {
  const Tokenizer tok(bpe_vocab({}));
  const TokenId eot = tok.eos();
  EXPECT_EQ(tok.encode("a<|endoftext|>b", false, true), (std::vector<TokenId>{'a', eot, 'b'}));
  EXPECT_EQ(tok.encode("a<|endoftext|>b", false, false).size(), 15u);
  EXPECT_EQ(tok.decode(std::vector<TokenId>{'a', eot, 'b'}), "ab");
  EXPECT_EQ(tok.decode(std::vector<TokenId>{'a', eot, 'b'}, true), "a<|endoftext|>b");
  EXPECT_EQ(tok.eot(), -1);  // not set by hand; load_vocab looks it up by text
}

std::vector<std::string> torture_strings() {
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/tokenizer_strings.json");
  std::vector<std::string> out = nlohmann::json::parse(in).at("strings");
  // Invalid UTF-8 that a byte-level tokenizer must still carry byte for byte.
  out.push_back("\xFF\xFE bad \xC3 lead \x80 cont \xED\xA0\x80 surrogate \xC0\xAF overlong");
  out.push_back(std::string("nul\0inside", 10));
  return out;
}

TEST(BpeTokenizer, Utf8TortureRoundTripsUnderEveryPreTokenizer) {
  for (const char* pre :
       {"gpt-2", "llama-bpe", "qwen2", "deepseek-r1-qwen", "deepseek-llm", "deepseek-coder"}) {
    const Tokenizer tok(bpe_vocab({"\xC4\xA0 t", "h e", "Ġt he"}, pre));
    for (const auto& s : torture_strings()) {
      const auto ids = tok.encode(s, false, false);
      EXPECT_EQ(tok.decode(ids), s) << pre << " \"" << s << "\"";
    }
  }
  // Random bytes too.
  const Tokenizer tok(bpe_vocab({}, "llama-bpe"));
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s(rng() % 40, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    EXPECT_EQ(tok.decode(tok.encode(s, false, false)), s);
  }
}

bool valid_utf8(const std::string& s) {
  for (const auto& c : decode_utf8(s))
    if (c.raw) return false;
  return true;
}

TEST(StreamDecoder, HoldsIncompleteCharactersUntilTheyComplete) {
  const Tokenizer tok(bpe_vocab({}));
  const std::string text = "h\xC3\xA9llo \xF0\x9F\xA6\x99 \xE4\xB8\x96";  // "héllo 🦙 世"
  const auto ids = tok.encode(text, false);
  ASSERT_EQ(ids.size(), text.size());  // no merges: one token per byte
  StreamDecoder dec(tok);
  std::string joined;
  std::vector<std::string> parts;
  for (TokenId id : ids) {
    parts.push_back(dec.push(id));
    EXPECT_TRUE(valid_utf8(parts.back()));
    joined += parts.back();
  }
  joined += dec.flush();
  EXPECT_EQ(joined, text);
  // Split points: 'h', then nothing until é completes, ... the llama's 4 bytes give
  // "", "", "", then the whole character.
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(parts[2], "\xC3\xA9");
  EXPECT_EQ(parts[7], "");
  EXPECT_EQ(parts[8], "");
  EXPECT_EQ(parts[9], "");
  EXPECT_EQ(parts[10], "\xF0\x9F\xA6\x99");
}

TEST(StreamDecoder, ReplacesBytesThatCanNeverFormACharacter) {
  const Tokenizer tok(bpe_vocab({}));
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(0x80), "\xEF\xBF\xBD");  // continuation without a lead
  EXPECT_EQ(dec.push(0xE4), "");
  EXPECT_EQ(dec.push('a'),
            "\xEF\xBF\xBD"
            "a");  // broken sequence, then the ASCII byte
  EXPECT_EQ(dec.push(0xF0), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");  // unfinished at the end
  EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, SpmByteTokensAcrossSteps) {
  const Tokenizer tok(spm_vocab());
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(267), " he");
  EXPECT_EQ(dec.push(3 + 0xC3), "");
  EXPECT_EQ(dec.push(3 + 0xA9), "\xC3\xA9");
  EXPECT_EQ(dec.push(1), "");  // control token: no text
}

TEST(Vocab, BadVocabulariesAreFormatErrors) {
  VocabData v = spm_vocab();
  v.scores.pop_back();
  EXPECT_THROW(Tokenizer{v}, FormatError);
  v = spm_vocab();
  v.bos_id = 100000;
  EXPECT_THROW(Tokenizer{v}, FormatError);
  v = spm_vocab();
  v.model = "bert";
  EXPECT_THROW(Tokenizer{v}, FormatError);
  v = bpe_vocab({"nospace"});
  EXPECT_THROW(Tokenizer{v}, FormatError);
  v = bpe_vocab({}, "no-such-pre");
  EXPECT_THROW(Tokenizer{v}, FormatError);
  v = spm_vocab();
  v.tokens[3 + 0x41] = "<0xZZ>";  // a malformed byte token decodes as its text
  EXPECT_EQ(Tokenizer(v).token_to_bytes(3 + 0x41), "<0xZZ>");
  const Tokenizer tok(spm_vocab());
  EXPECT_EQ(tok.token_to_bytes(3 + 0x41), "A");
  EXPECT_THROW(tok.piece(-1), UsageError);
  EXPECT_THROW(tok.token_to_bytes(99999), UsageError);
}

std::vector<uint8_t> vocab_gguf(const VocabData& v, bool with_eot_text) {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", gguf::Value::string(v.model));
  w.set("tokenizer.ggml.pre", gguf::Value::string(v.pre));
  std::vector<gguf::Value> toks, types;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    toks.push_back(gguf::Value::string(v.tokens[i]));
    types.push_back(gguf::Value::i32(static_cast<int32_t>(v.token_types[i])));
  }
  if (with_eot_text) {
    toks.push_back(gguf::Value::string("<|im_end|>"));
    types.push_back(gguf::Value::i32(3));
  }
  w.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::kString, toks));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::kI32, types));
  std::vector<gguf::Value> merges;
  for (const auto& m : v.merges) merges.push_back(gguf::Value::string(m));
  w.set("tokenizer.ggml.merges", gguf::Value::array(gguf::ValueType::kString, merges));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(static_cast<uint32_t>(v.eos_id)));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(static_cast<uint32_t>(v.eos_id)));
  w.set("tokenizer.chat_template", gguf::Value::string("{{ x }}"));
  return w.write_memory();
}

TEST(Vocab, LoadsFromGguf) {
  const VocabData v = bpe_vocab({"h e"}, "llama-bpe");
  const auto bytes = vocab_gguf(v, true);
  const auto file = gguf::GgufFile::parse(bytes, "vocab.gguf");
  const VocabData got = load_vocab(file);
  EXPECT_EQ(got.model, "gpt2");
  EXPECT_EQ(got.pre, "llama-bpe");
  EXPECT_EQ(got.tokens.size(), v.tokens.size() + 1);
  EXPECT_EQ(got.merges, v.merges);
  EXPECT_EQ(got.bos_id, v.eos_id);
  EXPECT_TRUE(got.add_bos);  // llama-bpe default
  EXPECT_FALSE(got.add_eos);
  EXPECT_EQ(got.eot_id, static_cast<TokenId>(v.tokens.size()));  // found by its text
  EXPECT_EQ(got.chat_template, "{{ x }}");
  EXPECT_EQ(got.token_types[v.eos_id], TokenType::kControl);
  const Tokenizer tok(got);
  EXPECT_EQ(tok.encode("he", true), (std::vector<TokenId>{v.eos_id, 256}));
}

TEST(Vocab, MissingKeysNameTheKey) {
  gguf::GgufWriter w;
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  const auto bytes = w.write_memory();
  const auto file = gguf::GgufFile::parse(bytes, "empty.gguf");
  try {
    load_vocab(file);
    FAIL() << "no exception";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.tokens"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hearth::text

namespace hearth::text {
namespace {

TEST(Vocab, HostileMetadataIsAFormatErrorNamingTheKey) {
  auto expect_error = [](const std::function<void(gguf::GgufWriter&)>& tweak, const char* key) {
    gguf::GgufWriter w;
    w.set("tokenizer.ggml.model", gguf::Value::string("llama"));
    w.set("tokenizer.ggml.tokens",
          gguf::Value::array(gguf::ValueType::kString,
                             {gguf::Value::string("<unk>"), gguf::Value::string("<s>"),
                              gguf::Value::string("</s>")}));
    tweak(w);
    const auto bytes = w.write_memory();
    const auto file = gguf::GgufFile::parse(bytes, "hostile.gguf");
    try {
      Tokenizer tok(load_vocab(file));
      ADD_FAILURE() << key << ": no exception";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  expect_error([](auto& w) { w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(7)); },
               "bos_token_id");
  expect_error(
      [](auto& w) {
        w.set("tokenizer.ggml.token_type",
              gguf::Value::array(gguf::ValueType::kI32,
                                 {gguf::Value::i32(1), gguf::Value::i32(9), gguf::Value::i32(1)}));
      },
      "token_type");
  expect_error(
      [](auto& w) {
        w.set("tokenizer.ggml.scores",
              gguf::Value::array(gguf::ValueType::kF32, {gguf::Value::f32(0)}));
      },
      "scores");
  expect_error([](auto& w) { w.set("tokenizer.ggml.model", gguf::Value::string("t5")); }, "t5");
  expect_error(
      [](auto& w) {
        w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
        w.set("tokenizer.ggml.pre", gguf::Value::string("qwen2"));
      },
      "merges");
  expect_error([](auto& w) { w.set("tokenizer.ggml.tokens", gguf::Value::string("x")); },
               "tokenizer.ggml.tokens");
}

}  // namespace
}  // namespace hearth::text
