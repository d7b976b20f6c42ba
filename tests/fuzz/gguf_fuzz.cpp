// libFuzzer target for the GGUF reader: any input must either parse into views that stay
// inside the buffer, or throw FormatError. Run with `make fuzz` (seeds: tests/fixtures/gguf_seeds).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hearth;
  gguf::ReadLimits limits;
  limits.max_string_bytes = 1 << 20;  // keep the fuzzer's memory bounded
  limits.max_array_items = 1 << 20;
  try {
    const auto f = gguf::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz", limits);
    uint64_t sum = 0;
    for (const auto& t : f.tensors()) {
      if (t.data < data || t.data + t.bytes > data + size) std::abort();  // a view escaped the buffer
      if (t.bytes > 0) sum += t.data[0] + t.data[t.bytes - 1];
    }
    for (const auto& kv : f.metadata()) sum += kv.key.size();
    (void)f.get_string_array("tokenizer.ggml.tokens");
    return static_cast<int>(sum & 0);
  } catch (const FormatError&) {
    return 0;
  }
}
