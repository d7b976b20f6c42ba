// The vocabulary as plain data: what a tokenizer needs, filled from the `tokenizer.ggml.*`
// keys of a GGUF file or built by hand in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hearth::gguf {
class GgufFile;
}

namespace hearth::text {

// tokenizer.ggml.token_type values (llama.cpp's numbering, stored in GGUF files).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct VocabData {
  std::string model = "llama";  // "llama" (SentencePiece-style) or "gpt2" (byte-level BPE)
  std::string pre;              // pre-tokenizer name for gpt2 models ("llama-bpe", "qwen2", ...)
  std::vector<std::string> tokens;     // (n_vocab) token texts
  std::vector<float> scores;           // (n_vocab) f32 merge priorities, or empty (all 0)
  std::vector<TokenType> token_types;  // (n_vocab), or empty (all normal)
  std::vector<std::string> merges;     // (n_merges) "left right", rank = index (gpt2 only)
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t eot_id = -1;  // end of turn (<|eot_id|>, <|im_end|>, ...), -1 when none
  int32_t pad_id = -1;
  int32_t unk_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // "llama" only: a space before text at the start
  std::string chat_template;      // tokenizer.chat_template (Jinja), empty when absent
};

// Reads the tokenizer.ggml.* keys. Defaults follow llama.cpp where a key is absent: "llama"
// vocabularies get bos 1, eos 2, unk 0, add_bos and add_space_prefix; the "llama-bpe"
// pre-tokenizer adds BOS; an absent EOT id is looked up by its usual texts.
// Throws FormatError (naming the file and key) on a missing or inconsistent vocabulary.
VocabData load_vocab(const gguf::GgufFile& file);

// Checks sizes and ids; throws FormatError naming the field. Called by Tokenizer too.
void validate_vocab(const VocabData& vocab, const std::string& source);

}  // namespace hearth::text
