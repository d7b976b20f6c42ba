// When to release windows just used (issue 4, prima.cpp v2 A.1): only when this device's
// share of the weights does not fit in the memory it has. Releasing when everything fits
// would only make the next token read the same bytes from disk again.
#pragma once

#include <cstdint>
#include <string_view>

#include "hearth/residency/memory_status.h"

namespace hearth::residency {

enum class ReleaseMode { kAuto, kOn, kOff };

// "auto" | "on" | "off"; UsageError naming the value otherwise.
ReleaseMode parse_release_mode(std::string_view text);
std::string_view release_mode_name(ReleaseMode m);

// kAuto: on when share_bytes (this device's layer bytes, page-rounded) exceed what the
// device can hold: the paper's available memory (free plus reclaimable file cache, which
// includes the part of the share already cached), and at least the unreclaimed figure plus
// share_resident (for a status whose file pages are unknown).
bool release_enabled(ReleaseMode mode, uint64_t share_bytes, uint64_t share_resident,
                     const MemoryStatus& mem);

}  // namespace hearth::residency
