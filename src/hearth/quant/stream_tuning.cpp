// Which prefetch distances the decode kernels use, per CPU (stream_tuning.h). Each was chosen
// side by side with bench/ab_kernels.sh on its CPU; docs/kernels.md keeps the measurements.
#include "hearth/quant/stream_tuning.h"

#include <cstdlib>
#include <string>

#include "hearth/base/cpu_features.h"
#include "hearth/base/error.h"

namespace hearth::quant {
namespace {

// Zen 4: GGUF rows take the long-row variants past 20 KiB only: shorter rows ran slower with
// their extra prefetches at 2 threads.
constexpr StreamTuning kZen4{"zen4", StreamCpu::kZen4, size_t{20} << 10};
// Zen 5: the GGUF-layout kernels reached their bandwidth at every row length with the L2
// prefetches of the long-row variants.
constexpr StreamTuning kZen5{"zen5", StreamCpu::kZen5, 0};

}  // namespace

const StreamTuning& stream_tuning_for_cpu(bool amd, int family) {
  return amd && family >= 0x1A ? kZen5 : kZen4;
}

const StreamTuning* stream_tuning_named(std::string_view name) {
  for (const StreamTuning* t : {&kZen4, &kZen5}) {
    if (t->name == name) return t;
  }
  return nullptr;
}

const StreamTuning& stream_tuning() {
  static const StreamTuning& tuning = []() -> const StreamTuning& {
    if (const char* env = std::getenv("HEARTH_STREAM_TUNING"); env != nullptr && *env != '\0') {
      const StreamTuning* t = stream_tuning_named(env);
      if (t == nullptr) {
        throw UsageError(std::string("HEARTH_STREAM_TUNING=") + env + ": expected zen4 or zen5");
      }
      return *t;
    }
    const CpuVendorFamily id = cpu_vendor_family();
    return stream_tuning_for_cpu(id.amd, id.family);
  }();
  return tuning;
}

}  // namespace hearth::quant
