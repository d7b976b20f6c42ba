// Pre-tokenizers of byte-level BPE vocabularies: split text into words before merges, as
// the regular expression named by `tokenizer.ggml.pre` does. Each rule is a hand-written
// matcher (std::regex has no \p{L}); results follow llama.cpp's splitting, including its
// treatment of non-ASCII whitespace and invalid UTF-8 bytes.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace hearth::text {

enum class PreTokenizer {
  kGpt2,  // gpt-2 (and "" / default): 's|'t|... | ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kLlama3,  // llama-bpe: case-insensitive contractions, [^\r\n\p{L}\p{N}]?\p{L}+, \p{N}{1,3}, ...
  kQwen2,   // qwen2, deepseek-r1-qwen: as llama-bpe with single digits \p{N}
  kDeepseekLlm,    // deepseek-llm: six expressions applied one after another
  kDeepseekCoder,  // deepseek-coder: [\r\n], \s?\p{L}+, \s?\p{P}+, CJK runs, single \p{N}
};

// Maps a `tokenizer.ggml.pre` value; throws FormatError naming it when unsupported.
PreTokenizer pre_tokenizer_from_name(std::string_view name);

// Splits `text` into words, as byte ranges [begin, end) that cover the text in order.
std::vector<std::pair<uint32_t, uint32_t>> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace hearth::text
