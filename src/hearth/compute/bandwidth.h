// Memory read bandwidth as the kernels see it: pool threads stream a buffer far larger than
// the caches with the widest loads this CPU has. The roofline that matvec is compared against.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hearth/compute/thread_pool.h"

namespace hearth::compute {

// Read GB/s (1e9 bytes/s) with pool.size() threads streaming a `bytes` buffer, `reps` passes.
// Each pass is timed in 64 MiB windows (each thread reads its share of the window) and the
// best window is returned: on a shared machine short windows are the ones that run without
// being descheduled, and a window is still ~100x the L2, read once per pass, so it comes
// from DRAM as long as `bytes` exceeds the LLC. Allocates and touches the buffer first.
double measure_memory_read_gbps(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 5);

// Seconds for one parallel read of data[0, bytes): thread i of the pool streams the i-th
// contiguous share with the same read loop as measure_memory_read_gbps. Benchmarks time it
// right next to a kernel call on the same pool and an equally cold buffer, so both see the
// same machine state (the honest roofline on a machine shared with other work).
double time_parallel_read(ThreadPool& pool, const void* data, size_t bytes);

// Read GB/s of the best 64 MiB window of one parallel pass over data[0, bytes) (each thread
// reads its share of a window; a tail shorter than a window is not read): the figure
// measure_memory_read_gbps takes per pass, for a caller that keeps its own cold buffer.
double best_window_read_gbps(ThreadPool& pool, const void* data, size_t bytes);

// The read loop: returns a value depending on every 64-byte line of p[0, bytes) so the loads
// cannot be dropped. Dispatches on the CPU (AVX-512 / AVX2 loads where present).
uint64_t read_stream(const uint8_t* p, size_t bytes);

namespace detail {
#if defined(__x86_64__)
uint64_t read_stream_avx2(const uint8_t* p, size_t bytes);    // bandwidth_avx2.cpp
uint64_t read_stream_avx512(const uint8_t* p, size_t bytes);  // bandwidth_avx512.cpp
#endif
}  // namespace detail

}  // namespace hearth::compute
