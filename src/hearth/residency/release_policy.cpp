#include "hearth/residency/release_policy.h"

#include <algorithm>

#include "hearth/base/enum_names.h"

namespace hearth::residency {

namespace {
constexpr EnumName<ReleaseMode> kReleaseModeNames[] = {
    {ReleaseMode::kAuto, "auto"}, {ReleaseMode::kOn, "on"}, {ReleaseMode::kOff, "off"}};
}  // namespace

ReleaseMode parse_release_mode(std::string_view text) {
  return parse_enum(kReleaseModeNames, text, "--release");
}

std::string_view release_mode_name(ReleaseMode m) {
  return enum_name(kReleaseModeNames, m);
}

bool release_enabled(ReleaseMode mode, uint64_t share_bytes, uint64_t share_resident,
                     const MemoryStatus& mem) {
  if (mode != ReleaseMode::kAuto) return mode == ReleaseMode::kOn;
  return share_bytes > std::max(mem.available, mem.available_unreclaimed + share_resident);
}

}  // namespace hearth::residency
