// Seeded device sets for measuring the planner at scale: copies of a base testbed's devices
// (the paper's Table 3 devices by default) with every measured figure scaled by its own
// factor in [1 - jitter, 1 + jitter]. The first device is the head. Larger fleets of one seed
// extend smaller ones (the first n devices of fleet(seed, 2n) are fleet(seed, n)), so a
// superset can be compared with its subset.
#pragma once

#include <cstdint>
#include <vector>

#include "hearth/profile/device_profile.h"

namespace hearth::plan {

std::vector<profile::DeviceProfile> jittered_fleet(const std::vector<profile::DeviceProfile>& base,
                                                   size_t count, uint64_t seed,
                                                   double jitter = 0.3);

}  // namespace hearth::plan
