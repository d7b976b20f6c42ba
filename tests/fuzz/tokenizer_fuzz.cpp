// libFuzzer target for the tokenizer on hostile text (a byte-level BPE vocabulary like
// Llama 3's, and Qwen 2's pre-tokenizer): encode with and without special-token parsing,
// decode back, decode arbitrary ids; and the stop-string matcher over the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/model/synth_vocab.h"
#include "hearth/serve/stop_matcher.h"
#include "hearth/text/tokenizer.h"

namespace {

hearth::text::Tokenizer make(hearth::model::Arch arch) {
  const auto sv = hearth::model::make_synth_vocab(arch, 2048, 7);
  hearth::text::VocabData v;
  v.model = sv.model;
  v.pre = sv.pre;
  v.tokens = sv.tokens;
  for (int32_t t : sv.token_types) v.token_types.push_back(static_cast<hearth::text::TokenType>(t));
  v.merges = sv.merges;
  v.bos_id = static_cast<int32_t>(sv.bos);
  v.eos_id = static_cast<int32_t>(sv.eos);
  v.eot_id = static_cast<int32_t>(sv.eot);
  v.add_bos = sv.add_bos;
  return hearth::text::Tokenizer(std::move(v), "fuzz");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  static const text::Tokenizer llama = make(model::Arch::kLlama);
  static const text::Tokenizer qwen = make(model::Arch::kQwen2);
  if (size < 1) return 0;
  const text::Tokenizer& tok = data[0] & 1 ? qwen : llama;
  const std::string_view s(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (const bool special : {false, true}) {
    const auto ids = tok.encode(s, /*add_special=*/false, special);
    for (auto id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= tok.n_vocab()) std::abort();
    }
    // Byte-level BPE without special tokens loses nothing: the text comes back as it was.
    if (!special && tok.decode(ids, /*special=*/true, false) != s) std::abort();
  }
  // Any ids: in range decode, out of range is a UsageError.
  std::vector<text::TokenId> ids;
  for (size_t i = 1; i + 1 < size; i += 2) ids.push_back(data[i] | (data[i + 1] << 8));
  try {
    (void)tok.decode(ids, data[0] & 2);
  } catch (const UsageError&) {
  }
  // Stop strings taken from the text's start, the text pushed in pieces: what is emitted never
  // holds a stop string, and emitted + held is a prefix of the text.
  const std::string stop(s.substr(0, 1 + (data[0] >> 5)));
  serve::StopMatcher m({stop, "\n\n"});
  std::string emitted;
  size_t at = 0;
  while (at < s.size() && !m.stopped()) {
    const size_t n = 1 + (s[at] & 7);
    emitted += m.push(s.substr(at, n));
    at += n;
  }
  if (!m.stopped()) emitted += m.flush();
  if (!stop.empty() && emitted.find(stop) != std::string::npos) std::abort();
  if (s.substr(0, emitted.size()) != emitted) std::abort();
  return 0;
}
