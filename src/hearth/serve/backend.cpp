#include "hearth/serve/backend.h"

#include <algorithm>

namespace hearth::serve {

std::vector<DevicePressure> LocalBackend::device_pressure() {
  const double p = residency::memory_pressure(base_, residency::read_memory_status());
  pressure_max_ = std::max(pressure_max_, p);
  ++samples_;
  return {DevicePressure{"local", p, pressure_max_, samples_}};
}

std::vector<DevicePressure> RingBackend::device_pressure() {
  const auto totals = ring_.device_stats();
  const auto& devices = ring_.devices();
  last_.resize(totals.size());
  recent_.resize(totals.size(), 0.0);
  std::vector<DevicePressure> out;
  for (size_t d = 0; d < totals.size(); ++d) {
    const auto& t = totals[d];
    // Mean over the steps since the previous sample; without new steps, the last figure.
    if (t.steps > last_[d].steps) {
      recent_[d] =
          (t.sum.pressure - last_[d].sum.pressure) / static_cast<double>(t.steps - last_[d].steps);
    }
    last_[d] = t;
    out.push_back(DevicePressure{d < devices.size() ? devices[d].name : std::to_string(d),
                                 recent_[d], t.pressure_max, t.steps});
  }
  return out;
}

}  // namespace hearth::serve
