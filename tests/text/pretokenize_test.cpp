// Pre-tokenizer splits checked by hand against the expressions they implement.
#include "hearth/text/pretokenize.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hearth::text {
namespace {

std::vector<std::string> words(PreTokenizer kind, const std::string& text) {
  std::vector<std::string> out;
  for (const auto& [b, e] : pre_tokenize(kind, text)) out.push_back(text.substr(b, e - b));
  return out;
}

using W = std::vector<std::string>;

TEST(PreTokenize, Gpt2) {
  // \s+(?!\S): of two spaces, the last joins the next word.
  EXPECT_EQ(words(PreTokenizer::kGpt2, "Hello  world's 12345!?"),
            (W{"Hello", " ", " world", "'s", " 12345", "!?"}));
  // Contractions are case-sensitive in gpt-2.
  EXPECT_EQ(words(PreTokenizer::kGpt2, "I'M"), (W{"I", "'", "M"}));
  EXPECT_EQ(words(PreTokenizer::kGpt2, "a \n"), (W{"a", " \n"}));
}

TEST(PreTokenize, Llama3AndQwen2) {
  EXPECT_EQ(words(PreTokenizer::kLlama3, "1234567"), (W{"123", "456", "7"}));
  EXPECT_EQ(words(PreTokenizer::kQwen2, "123"), (W{"1", "2", "3"}));
  EXPECT_EQ(words(PreTokenizer::kLlama3, "I'M"), (W{"I", "'M"}));
  // [^\r\n\p{L}\p{N}]?\p{L}+ takes one leading symbol; \s*[\r\n]+ ends at the last break.
  EXPECT_EQ(words(PreTokenizer::kLlama3, "(hi)\n\n  x"), (W{"(hi", ")\n\n", " ", " x"}));
  EXPECT_EQ(words(PreTokenizer::kLlama3, "a  \n b"), (W{"a", "  \n", " b"}));
  // CJK ideographs are letters; the full-width comma is a symbol.
  EXPECT_EQ(words(PreTokenizer::kQwen2, "你好，世界"), (W{"你好", "，世界"}));
}

TEST(PreTokenize, DeepseekLlm) {
  // Six expressions in sequence; the punctuation class includes ASCII letters (:-~), so a
  // cased-letter run with a non-ASCII letter is split again around it.
  EXPECT_EQ(words(PreTokenizer::kDeepseekLlm, "h\xC3\xA9llo"), (W{"h", "\xC3\xA9", "llo"}));
  EXPECT_EQ(words(PreTokenizer::kDeepseekLlm, "ab 12\n"), (W{"ab", " ", "12", "\n"}));
  EXPECT_EQ(words(PreTokenizer::kDeepseekLlm, "中文abc"), (W{"中文", "abc"}));
}

TEST(PreTokenize, DeepseekCoder) {
  // Letters, punctuation and single digits are split out; what is left between them (here
  // " =" and "+", symbols rather than \p{P}) stays one piece.
  EXPECT_EQ(words(PreTokenizer::kDeepseekCoder, "x1 = f(42)+y"),
            (W{"x", "1", " =", " f", "(", "4", "2", ")", "+", "y"}));
}

TEST(PreTokenize, CoversTheInputExactly) {
  const std::string text = "x\xFF\xC3 y  \t\n\xE4\xB8 z";  // invalid bytes included
  for (auto kind : {PreTokenizer::kGpt2, PreTokenizer::kLlama3, PreTokenizer::kQwen2,
                    PreTokenizer::kDeepseekLlm, PreTokenizer::kDeepseekCoder}) {
    std::string joined;
    for (const auto& w : words(kind, text)) {
      EXPECT_FALSE(w.empty());
      joined += w;
    }
    EXPECT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace hearth::text
