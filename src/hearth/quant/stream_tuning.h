// How far ahead the decode kernels prefetch the weights they stream, chosen once per process
// for the CPU at hand. The best distances moved with the microarchitecture: on the AMD EPYC
// Zen 4 the kernels were tuned on, longer distances streamed slower, while on Zen 5, with more
// read bandwidth per core, the same kernels fell well below it with Zen 4's distances and
// reached it with longer ones (docs/kernels.md, "Prefetch distance per CPU"). Only CPUs
// measured get a table of their own; every other CPU keeps Zen 4's.
#pragma once

#include <cstddef>
#include <string_view>

#include "hearth/base/cpu_features.h"

namespace hearth::quant {

// The sets of distances the kernels are built with (rows16_dot_tuned), named for the CPU each
// was first chosen on; a table may reuse another CPU's set.
enum class StreamCpu { kZen4, kZen5 };

struct StreamTuning {
  std::string_view name;  // "zen4", "zen5" or "spr": HEARTH_STREAM_TUNING takes these names
  StreamCpu cpu;          // which distances the rows16 AVX-512 kernels prefetch at
  // GGUF-layout matvec rows whose weight row and activation together pass this many bytes
  // take the kernels' long-row variants, which also prefetch into L2 (vec_dot_long, dot_long).
  size_t long_row_bytes;
};

// The table for a CPU: AMD family 0x1A (Zen 5) and later get "zen5", Intel Xeon Sapphire and
// Emerald Rapids "spr", everything else "zen4".
const StreamTuning& stream_tuning_for_cpu(const CpuVendorFamily& id);

// The table by name, or nullptr.
const StreamTuning* stream_tuning_named(std::string_view name);

// The table in use: HEARTH_STREAM_TUNING=zen4|zen5|spr if set (for side-by-side runs and CPUs not
// measured yet; another value throws UsageError), else this CPU's. Decided on the first call.
const StreamTuning& stream_tuning();

}  // namespace hearth::quant
