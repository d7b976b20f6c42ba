// `hearth tokenize -m FILE [--ids-only] [--no-bos] TEXT`: token ids and pieces of a text.
// Reads only the tokenizer.* metadata, so vocab-only GGUF files (llama.cpp's test
// vocabularies) work; used for tokenizer conformance checks against llama.cpp.
#include <fmt/core.h>

#include <iostream>
#include <iterator>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/text/tokenizer.h"
#include "hearth/text/unicode.h"
#include "hearth/text/vocab.h"

namespace hearth::cli {
namespace {

// A piece as printable text: valid UTF-8 as is, control bytes and stray bytes as \xNN.
std::string printable(const std::string& bytes) {
  std::string out;
  for (const auto& c : text::decode_utf8(bytes)) {
    if (c.raw || c.cp < 0x20 || c.cp == 0x7F) {
      if (c.cp == '\n') {
        out += "\\n";
      } else if (c.cp == '\t') {
        out += "\\t";
      } else {
        out += fmt::format("\\x{:02x}", static_cast<unsigned>(c.cp));
      }
    } else {
      out.append(bytes, c.begin, c.len);
    }
  }
  return out;
}

int run_tokenize(const Args& args) {
  CLI::App app{"Print the token ids and pieces of a text (works on vocab-only GGUF files)",
               "tokenize"};
  std::string model;
  std::string text;
  bool ids_only = false;
  bool no_bos = false;
  bool no_parse_special = false;
  bool from_stdin = false;
  app.add_option("-m,--model", model, "GGUF file (only tokenizer metadata is read)")->required();
  app.add_option("text", text, "text to tokenize");
  app.add_flag("--ids-only", ids_only, "print only the ids, as [1, 2, 3]");
  app.add_flag("--no-bos", no_bos, "do not add BOS/EOS even if the vocabulary asks for them");
  app.add_flag("--no-parse-special", no_parse_special,
               "treat control-token texts such as <|im_end|> as plain text");
  app.add_flag("--stdin", from_stdin, "read the text from standard input");
  if (auto code = parse(app, args)) return *code;
  if (from_stdin) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else if (app.count("text") == 0) {
    throw UsageError("give the text to tokenize (or --stdin)");
  }

  const auto file = gguf::GgufFile::open(model);
  const text::Tokenizer tok(text::load_vocab(file), model);
  const auto ids = tok.encode(text, !no_bos, !no_parse_special);
  if (ids_only) {
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", ids[i]);
    fmt::print("{}]\n", out);
    return 0;
  }
  for (text::TokenId id : ids) {
    fmt::print("{:>7} -> '{}'\n", id, printable(tok.token_to_bytes(id, true)));
  }
  return 0;
}

HEARTH_COMMAND("tokenize", "print token ids and pieces of a text", run_tokenize);

}  // namespace
}  // namespace hearth::cli
