#include "hearth/text/vocab.h"

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"

namespace hearth::text {
namespace {

int32_t read_id(const gguf::GgufFile& file, const char* key, int32_t fallback, size_t n_vocab) {
  const gguf::Value* v = file.find(key);
  if (v == nullptr) return fallback;
  const auto id = v->as_i64();
  // Some converters store -1 as u32 0xFFFFFFFF for "no such token".
  if (id && (*id == -1 || *id == 0xFFFFFFFFll)) return -1;
  if (!id || *id < 0 || static_cast<uint64_t>(*id) >= n_vocab) {
    throw FormatError(
        fmt::format("{}: {} is not a token id below n_vocab {}", file.path(), key, n_vocab));
  }
  return static_cast<int32_t>(*id);
}

}  // namespace

void validate_vocab(const VocabData& vocab, const std::string& source) {
  if (vocab.model != "llama" && vocab.model != "gpt2") {
    throw FormatError(fmt::format("{}: tokenizer.ggml.model '{}' is not supported (llama, gpt2)",
                                  source, vocab.model));
  }
  const size_t n = vocab.tokens.size();
  if (n == 0) throw FormatError(fmt::format("{}: tokenizer.ggml.tokens is empty", source));
  if (n > (1u << 31) - 1) throw FormatError(fmt::format("{}: too many tokens", source));
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    throw FormatError(fmt::format("{}: tokenizer.ggml.scores has {} entries, tokens {}", source,
                                  vocab.scores.size(), n));
  }
  if (!vocab.token_types.empty() && vocab.token_types.size() != n) {
    throw FormatError(fmt::format("{}: tokenizer.ggml.token_type has {} entries, tokens {}", source,
                                  vocab.token_types.size(), n));
  }
  const std::pair<const char*, int32_t> ids[] = {{"bos_token_id", vocab.bos_id},
                                                 {"eos_token_id", vocab.eos_id},
                                                 {"eot_token_id", vocab.eot_id},
                                                 {"padding_token_id", vocab.pad_id},
                                                 {"unknown_token_id", vocab.unk_id}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || (id >= 0 && static_cast<size_t>(id) >= n)) {
      throw FormatError(fmt::format("{}: tokenizer.ggml.{} {} is outside the vocabulary ({})",
                                    source, name, id, n));
    }
  }
  if ((vocab.add_bos && vocab.bos_id < 0) || (vocab.add_eos && vocab.eos_id < 0)) {
    throw FormatError(
        fmt::format("{}: add_bos/add_eos is set but the token id is missing", source));
  }
}

VocabData load_vocab(const gguf::GgufFile& file) {
  VocabData v;
  const std::string& path = file.path();
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model) throw FormatError(fmt::format("{}: tokenizer.ggml.model is missing", path));
  v.model = *model;
  v.pre = file.get_string("tokenizer.ggml.pre").value_or("");
  auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) throw FormatError(fmt::format("{}: tokenizer.ggml.tokens is missing", path));
  v.tokens = std::move(*tokens);
  if (auto scores = file.get_f64_array("tokenizer.ggml.scores")) {
    v.scores.assign(scores->begin(), scores->end());
  }
  if (auto types = file.get_i64_array("tokenizer.ggml.token_type")) {
    v.token_types.reserve(types->size());
    for (size_t i = 0; i < types->size(); ++i) {
      const int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        throw FormatError(
            fmt::format("{}: tokenizer.ggml.token_type[{}] = {} is not a token type", path, i, t));
      }
      v.token_types.push_back(static_cast<TokenType>(t));
    }
  }
  if (auto merges = file.get_string_array("tokenizer.ggml.merges")) v.merges = std::move(*merges);
  if (v.model == "gpt2" && v.merges.empty()) {
    throw FormatError(
        fmt::format("{}: tokenizer.ggml.merges is missing for a gpt2 vocabulary", path));
  }
  const size_t n = v.tokens.size();
  const bool spm = v.model == "llama";
  v.bos_id = read_id(file, "tokenizer.ggml.bos_token_id", spm && n > 1 ? 1 : -1, n);
  v.eos_id = read_id(file, "tokenizer.ggml.eos_token_id", spm && n > 2 ? 2 : -1, n);
  v.unk_id = read_id(file, "tokenizer.ggml.unknown_token_id", spm ? 0 : -1, n);
  v.pad_id = read_id(file, "tokenizer.ggml.padding_token_id", -1, n);
  v.eot_id = read_id(file, "tokenizer.ggml.eot_token_id", -1, n);
  if (v.eot_id < 0) {
    // Converters rarely store the EOT id; chat models mark the end of a turn with one of
    // these texts (the same list llama.cpp uses).
    static const char* const kEotTexts[] = {"<|eot_id|>",    "<|im_end|>",    "<|end|>",
                                            "<end_of_turn>", "<|endoftext|>", "<EOT>"};
    for (const char* text : kEotTexts) {
      for (size_t i = 0; i < n && v.eot_id < 0; ++i) {
        if (v.tokens[i] == text) v.eot_id = static_cast<int32_t>(i);
      }
      if (v.eot_id >= 0) break;
    }
  }
  v.add_bos = spm || v.pre == "llama-bpe" || v.pre == "llama3" || v.pre == "llama-v3";
  v.add_space_prefix = spm;
  if (auto b = file.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (auto b = file.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b && spm;
  v.chat_template = file.get_string("tokenizer.chat_template").value_or("");
  validate_vocab(v, path);
  return v;
}

}  // namespace hearth::text
