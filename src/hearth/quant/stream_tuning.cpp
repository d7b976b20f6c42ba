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
// Intel Xeon Sapphire Rapids and Emerald Rapids (family 6, models 0x8F and 0xCF; measured on
// Emerald Rapids): Zen 5's distances and long-row variants for every row. With Zen 4's table
// the GGUF-layout kernels for short rows streamed well below the bandwidth there.
constexpr StreamTuning kSpr{"spr", StreamCpu::kZen5, 0};

}  // namespace

const StreamTuning& stream_tuning_for_cpu(const CpuVendorFamily& id) {
  if (id.amd && id.family >= 0x1A) return kZen5;
  if (id.intel && id.family == 0x6 && (id.model == 0x8F || id.model == 0xCF)) return kSpr;
  return kZen4;
}

const StreamTuning* stream_tuning_named(std::string_view name) {
  for (const StreamTuning* t : {&kZen4, &kZen5, &kSpr}) {
    if (t->name == name) return t;
  }
  return nullptr;
}

const StreamTuning& stream_tuning() {
  static const StreamTuning& tuning = []() -> const StreamTuning& {
    if (const char* env = std::getenv("HEARTH_STREAM_TUNING"); env != nullptr && *env != '\0') {
      const StreamTuning* t = stream_tuning_named(env);
      if (t == nullptr) {
        throw UsageError(std::string("HEARTH_STREAM_TUNING=") + env +
                         ": expected zen4, zen5 or spr");
      }
      return *t;
    }
    return stream_tuning_for_cpu(cpu_vendor_family());
  }();
  return tuning;
}

}  // namespace hearth::quant
