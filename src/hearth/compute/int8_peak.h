// The int8 multiply-add rate of this CPU's dot idiom with every operand in registers: the
// compute roofline that prefill (matmul) is compared against, as the memory read bandwidth
// is decode's. Nothing is loaded, so the figure is the instruction issue limit alone.
#pragma once

#include <cstdint>

#include "hearth/compute/thread_pool.h"

namespace hearth::compute {

struct Int8Peak {
  double gmacs = 0;        // 1e9 multiply-adds per second, summed over the pool's threads
  const char* idiom = "";  // what was timed, e.g. "vpdpbusd zmm"
};

// Runs the active ISA's int8 dot idiom (AVX-512 VNNI: vpdpbusd on 512 bits; AVX2:
// vpmaddubsw + vpmaddwd + vpaddd on 256 bits) on every pool thread, independent accumulator
// chains, for about `seconds`; best of three. gmacs == 0 when the ISA has no probe (scalar,
// NEON: not measured on hardware here).
Int8Peak measure_int8_peak(ThreadPool& pool, double seconds = 0.03);

// The same for the AMX tile unit where quant::amx_usable(): tdpbusd with its operands already
// in tiles, on every pool thread. Beside it the AMX kernels' figures read as a share of what
// the unit itself can do, and a shared host's tile unit shows when other work takes it (its
// rate falls while the vector peak does not). gmacs == 0 without AMX.
Int8Peak measure_amx_peak(ThreadPool& pool, double seconds = 0.03);

namespace detail {
#if defined(__x86_64__)
uint64_t int8_dot_loop_avx512(int64_t iterations);  // int8_peak_avx512.cpp; returns MACs done
uint64_t int8_dot_loop_avx2(int64_t iterations);    // int8_peak_avx2.cpp
uint64_t amx_tile_loop(int64_t iterations);         // int8_peak_amx.cpp
#endif
}  // namespace detail

}  // namespace hearth::compute
