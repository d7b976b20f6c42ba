#include "hearth/cluster/model_identity.h"

#include <fmt/core.h>

namespace hearth::cluster {

net::ModelIdentity model_identity(const gguf::GgufFile& file) {
  // FNV-1a 64 over the header bytes: not cryptographic (this catches mistakes, not attacks;
  // CURVE keys guard against the latter), but stable across builds and machines.
  const auto bytes = file.bytes().first(std::min<uint64_t>(file.data_offset(), file.file_size()));
  uint64_t h = 0xcbf29ce484222325ull;
  for (const uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return net::ModelIdentity{file.file_size(), h};
}

std::string describe(const net::ModelIdentity& id) {
  return fmt::format("{} bytes, header hash {:016x}", id.file_size, id.hash);
}

}  // namespace hearth::cluster
