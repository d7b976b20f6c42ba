// libFuzzer target for the wire decoder. Properties checked on every input:
// - decode() either returns or throws hearth::FormatError (any other exception, a crash or a
//   sanitizer report is a bug);
// - a message that decodes re-encodes to exactly the input bytes (the codec is canonical), so
//   no field is silently misread.
// Seeds: tests/fixtures/wire/*.bin (one valid message per type plus handcrafted bad ones).
// Build: HEARTH_FUZZ=ON with clang, target wire_fuzz; run e.g.
//   build-fuzz/bin/wire_fuzz -max_total_time=60 -max_len=65536 corpus tests/fixtures/wire
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/net/crc32c.h"
#include "hearth/net/wire.h"

namespace {

void check(std::span<const uint8_t> bytes) {
  try {
    const hearth::net::Envelope env = hearth::net::decode(bytes, "fuzz");
    const auto again = hearth::net::encode(env.body, env.header.request_id);
    if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) {
      __builtin_trap();  // decoded to something that does not re-encode to the input
    }
  } catch (const hearth::FormatError&) {
    // Refused with a message: the expected outcome for garbage.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check({data, size});
  // Almost every mutation breaks the checksum, which would stop the fuzzer at the header.
  // Also try the input with payload_len and crc32c patched to match, so the payload decoders
  // see the mutated bytes.
  if (size >= hearth::net::kHeaderBytes) {
    std::vector<uint8_t> m(data, data + size);
    const uint64_t len = size - hearth::net::kHeaderBytes;
    for (int i = 0; i < 8; ++i) m[16 + i] = static_cast<uint8_t>(len >> (8 * i));
    std::fill(m.begin() + 12, m.begin() + 16, 0);
    const uint32_t crc = hearth::net::crc32c(m);
    for (int i = 0; i < 4; ++i) m[12 + i] = static_cast<uint8_t>(crc >> (8 * i));
    check(m);
  }
  return 0;
}
