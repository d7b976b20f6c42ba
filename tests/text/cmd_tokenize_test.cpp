// `hearth tokenize` on a vocab-only GGUF file written here: the real binary, spawned.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "hearth/gguf/gguf_writer.h"
#include "hearth/text/unicode.h"
#include "support/scratch_dir.h"

namespace hearth::text {
namespace {

struct Result {
  int status;
  std::string out;
};

Result run(const std::string& cmd) {
  Result r{-1, {}};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  return r;
}

// Byte-level vocabulary: 256 byte tokens, merges h+e (256), l+l (257), he+ll (258),
// Ġ+w (259), hell+o (260), and <|endoftext|> (261) as BOS with add_bos.
std::string write_vocab() {
  gguf::GgufWriter w;
  std::vector<gguf::Value> tokens, types, merges;
  for (int b = 0; b < 256; ++b) tokens.push_back(gguf::Value::string(byte_to_unicode(b)));
  for (const char* m : {"h e", "l l", "he ll", "\xC4\xA0 w", "hell o"}) {
    merges.push_back(gguf::Value::string(m));
    std::string t(m);
    t.erase(t.find(' '), 1);
    tokens.push_back(gguf::Value::string(t));
  }
  tokens.push_back(gguf::Value::string("<|endoftext|>"));
  for (size_t i = 0; i < tokens.size(); ++i) {
    types.push_back(gguf::Value::i32(i + 1 == tokens.size() ? 3 : 1));
  }
  w.set("general.architecture", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::Value::string("gpt-2"));
  w.set("tokenizer.ggml.tokens", gguf::Value::array(gguf::ValueType::kString, tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::kI32, types));
  w.set("tokenizer.ggml.merges", gguf::Value::array(gguf::ValueType::kString, merges));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(261));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(261));
  w.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  const auto path =
      hearth::testing::scratch_dir() / ("hearth_tokenize_" + std::to_string(::getpid()) + ".gguf");
  w.write_file(path.string());
  return path.string();
}

TEST(CmdTokenize, PrintsIdsAndPiecesOfAVocabOnlyFile) {
  const std::string vocab = write_vocab();
  const std::string bin = HEARTH_BIN_PATH;
  // "hello world" -> hello (260), Ġw (259), o r l d as byte tokens.
  auto r = run(bin + " tokenize -m " + vocab + " --ids-only 'hello world'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "[261, 260, 259, 111, 114, 108, 100]\n");
  r = run(bin + " tokenize -m " + vocab + " --ids-only --no-bos 'hello'");
  EXPECT_EQ(r.out, "[260]\n");
  r = run(bin + " tokenize -m " + vocab + " 'he<|endoftext|>'");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("256 -> 'he'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("261 -> '<|endoftext|>'"), std::string::npos) << r.out;
  r = run(bin + " tokenize -m " + vocab +
          " --ids-only --no-bos --no-parse-special '<|endoftext|>'");
  EXPECT_EQ(r.out.find("261"), std::string::npos) << r.out;
  std::filesystem::remove(vocab);
}

TEST(CmdTokenize, BadInputsGiveExitCodesNotCrashes) {
  const std::string bin = HEARTH_BIN_PATH;
  EXPECT_EQ(WEXITSTATUS(run(bin + " tokenize -m /nonexistent/file.gguf x").status), 1);
  EXPECT_EQ(WEXITSTATUS(run(bin + " tokenize x").status), 2);  // -m missing
  const auto junk = hearth::testing::scratch_dir() / "hearth_tokenize_junk.gguf";
  FILE* f = fopen(junk.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  fputs("GGUF not really", f);
  fclose(f);
  const auto r = run(bin + " tokenize -m " + junk.string() + " x");
  EXPECT_EQ(WEXITSTATUS(r.status), 1) << r.out;
  EXPECT_NE(r.out.find(junk.string()), std::string::npos) << r.out;
  std::filesystem::remove(junk);
}

}  // namespace
}  // namespace hearth::text
