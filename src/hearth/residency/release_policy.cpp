#include "hearth/residency/release_policy.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>

#include "hearth/base/error.h"

namespace hearth::residency {

ReleaseMode parse_release_mode(std::string_view text) {
  if (text == "auto") return ReleaseMode::kAuto;
  if (text == "on") return ReleaseMode::kOn;
  if (text == "off") return ReleaseMode::kOff;
  throw UsageError(fmt::format("release mode '{}': expected auto, on or off", std::string(text)));
}

std::string_view release_mode_name(ReleaseMode m) {
  switch (m) {
    case ReleaseMode::kAuto:
      return "auto";
    case ReleaseMode::kOn:
      return "on";
    case ReleaseMode::kOff:
      return "off";
  }
  return "?";
}

bool release_enabled(ReleaseMode mode, uint64_t share_bytes, uint64_t share_resident,
                     const MemoryStatus& mem) {
  if (mode != ReleaseMode::kAuto) return mode == ReleaseMode::kOn;
  return share_bytes > std::max(mem.available, mem.available_unreclaimed + share_resident);
}

}  // namespace hearth::residency
