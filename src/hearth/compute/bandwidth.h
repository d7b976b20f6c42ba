// Memory read bandwidth as the kernels see it: every pool thread streams its slice of a
// buffer far larger than the caches. The roofline that matvec is compared against.
#pragma once

#include <cstddef>

#include "hearth/compute/thread_pool.h"

namespace hearth::compute {

// Best-of-`reps` GB/s (1e9 bytes/s) for reading `bytes` bytes with pool.size() threads.
// Allocates and touches the buffer (first touch by the thread that will read each slice).
double measure_memory_read_gbps(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 5);

}  // namespace hearth::compute
