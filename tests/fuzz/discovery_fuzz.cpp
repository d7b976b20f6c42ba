// libFuzzer target for LAN announcements (net/discovery.h), the first bytes a stranger on the
// LAN can send a head. Properties checked on every input:
// - decode_announcement() returns or throws hearth::FormatError, keyed or not;
// - an announcement that decodes re-encodes to exactly the input bytes;
// - resolve_endpoint() on what it decoded returns or throws FormatError.
// Almost every mutation breaks the tag, so each input is also tried with its tag recomputed
// under the test key, letting the field checks see the mutated bytes.
// Build: HEARTH_FUZZ=ON with clang, target discovery_fuzz (make fuzz runs it).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/base/sha256.h"
#include "hearth/net/discovery.h"

namespace {

const std::string kKey(32, 'f');

void check(std::span<const uint8_t> bytes, const std::string& key) {
  try {
    const auto a = hearth::net::decode_announcement(bytes, key);
    const auto again = hearth::net::encode_announcement(a, key);
    if (!std::equal(again.begin(), again.end(), bytes.begin(), bytes.end())) __builtin_trap();
    try {
      (void)hearth::net::resolve_endpoint(a.endpoint, "192.168.1.20", key.empty());
    } catch (const hearth::FormatError&) {
    }
  } catch (const hearth::FormatError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check({data, size}, kKey);
  check({data, size}, "");
  if (size >= 16) {
    std::vector<uint8_t> patched(data, data + size);
    const auto mac = hearth::hmac_sha256(hearth::as_bytes(kKey), {data, size - 16});
    std::copy_n(mac.begin(), 16, patched.end() - 16);
    check(patched, kKey);
  }
  return 0;
}
