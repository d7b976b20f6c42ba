// libFuzzer target for everything a model file's metadata reaches before any weight is read:
// the GGUF header, hyper-parameters, the vocabulary and the tokenizer built from it, and the
// chat template chosen from it. Errors are hearth::Error subclasses, never a crash, an
// allocation failure or a hang. Seeds: tests/fixtures/gguf_seeds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/hparams.h"
#include "hearth/text/chat.h"
#include "hearth/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  gguf::ReadLimits limits;
  limits.max_string_bytes = 1 << 20;
  limits.max_array_items = 1 << 16;
  try {
    const auto f = gguf::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz", limits);
    try {
      (void)model::load_hparams(f);
    } catch (const Error&) {
    }
    const text::Tokenizer tok(text::load_vocab(f), "fuzz");
    (void)tok.encode("Hello world, <|eot_id|> 12345 héllo\n\n", true, true);
    const std::string tmpl = text::select_chat_template("", tok.vocab());
    (void)text::render_chat(tmpl, {{"user", "hi"}}, true, "<s>", "</s>");
  } catch (const Error&) {
  }
  return 0;
}
