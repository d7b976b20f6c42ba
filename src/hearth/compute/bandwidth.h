// Memory read bandwidth as the kernels see it: every pool thread streams its slice of a
// buffer far larger than the caches. The roofline that matvec is compared against.
#pragma once

#include <cstddef>

#include "hearth/compute/thread_pool.h"

namespace hearth::compute {

// Read GB/s (1e9 bytes/s) with pool.size() threads streaming a `bytes` buffer, `reps` passes.
// Each pass is timed in 64 MiB windows (each thread reads its share of the window) and the
// best window is returned: on a shared machine short windows are the ones that run without
// being descheduled, and a window is still ~100x the L2, read once per pass, so it comes
// from DRAM as long as `bytes` exceeds the LLC. Allocates and touches the buffer first.
double measure_memory_read_gbps(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 5);

}  // namespace hearth::compute
