// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for authenticating small messages with a
// shared secret (LAN discovery announcements, net/discovery.h). Not a hot path: plain code.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace hearth {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest sha256(std::span<const uint8_t> data);
Sha256Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data);

inline std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace hearth
