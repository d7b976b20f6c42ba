// Token ids compared with llama.cpp's tokenizer on its test vocabularies. The vocabularies
// are not in the repository (see docs/text.md): point HEARTH_VOCAB_DIR at a directory
// holding llama.cpp's models/ggml-vocab-*.gguf files; without it these tests are skipped.
// Expected ids were produced by llama.cpp for hearth's own strings (fixtures/text/).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hearth/gguf/gguf_file.h"
#include "hearth/text/tokenizer.h"

namespace hearth::text {
namespace {

nlohmann::json read_fixture(const std::string& name) {
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/" + name);
  return nlohmann::json::parse(in);
}

std::string vocab_dir() {
  const char* dir = std::getenv("HEARTH_VOCAB_DIR");
  return dir ? dir : "";
}

TEST(TokenizerConformance, MatchesLlamaCppIds) {
  const std::string dir = vocab_dir();
  if (dir.empty()) {
    GTEST_SKIP() << "HEARTH_VOCAB_DIR is not set: llama.cpp's ggml-vocab-*.gguf files are needed "
                    "(docs/text.md says how to get them)";
  }
  const auto strings = read_fixture("tokenizer_strings.json").at("strings");
  const auto cases = read_fixture("tokenizer_expected.json").at("cases");
  int checked_cases = 0;
  for (const auto& c : cases) {
    const std::string file = c.at("vocab");
    const std::string path = dir + "/" + file;
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " is missing from HEARTH_VOCAB_DIR";
      continue;
    }
    const auto gguf = gguf::GgufFile::open(path);
    VocabData vocab = load_vocab(gguf);
    std::string label = file;
    if (!c.at("pre_override").is_null()) {
      // The same vocabulary under another pre-tokenizer name: llama.cpp was run on a copy
      // of the file with only tokenizer.ggml.pre changed, so the name's defaults apply.
      vocab.pre = c.at("pre_override");
      label += " as " + vocab.pre;
      if (!gguf.get_bool("tokenizer.ggml.add_bos_token")) vocab.add_bos = vocab.pre == "llama-bpe";
    }
    const Tokenizer tok(vocab, path);
    const bool add_special = c.at("add_special");
    const bool parse_special = c.at("parse_special");
    const auto& ids = c.at("ids");
    ASSERT_EQ(ids.size(), strings.size()) << label;
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::string text = strings[i];
      const std::vector<TokenId> want = ids[i];
      EXPECT_EQ(tok.encode(text, add_special, parse_special), want)
          << label << " add_special=" << add_special << " parse_special=" << parse_special
          << " string #" << i << " \"" << text << "\"";
    }
    ++checked_cases;
  }
  EXPECT_EQ(checked_cases, static_cast<int>(cases.size()));
}

TEST(TokenizerConformance, DecodeRoundTripsOnRealVocabularies) {
  const std::string dir = vocab_dir();
  if (dir.empty()) GTEST_SKIP() << "HEARTH_VOCAB_DIR is not set (docs/text.md)";
  const auto strings = read_fixture("tokenizer_strings.json").at("strings");
  for (const char* file : {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf",
                           "ggml-vocab-deepseek-llm.gguf", "ggml-vocab-deepseek-coder.gguf"}) {
    const std::string path = dir + "/" + file;
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " is missing";
      continue;
    }
    const Tokenizer tok(load_vocab(gguf::GgufFile::open(path)), path);
    for (const auto& s : strings) {
      const std::string text = s;
      const auto ids = tok.encode(text, false, false);
      EXPECT_EQ(tok.decode(ids), text) << file << " \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace hearth::text
