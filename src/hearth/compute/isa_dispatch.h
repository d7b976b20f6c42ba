// How each compute op's entry point reaches its ISA variants (ops.h): detail::<kernel>_avx512
// and detail::<kernel>_avx2, built only on x86 (simd_kernels.inc). A macro, because off x86
// those names have no definition and must not be named at all.
#pragma once

#include "hearth/compute/ops.h"

// Returns detail::KERNEL_avx512(args...) or detail::KERNEL_avx2(args...) from the enclosing
// function when `isa` is that level; otherwise, and always off x86 (where isa_supported()
// reports neither level), goes on to the scalar code that follows it.
#if defined(__x86_64__)
#define HEARTH_RETURN_ISA_VARIANT(isa, kernel, ...)                   \
  do {                                                                \
    if ((isa) == ::hearth::compute::Isa::kAvx512) {                   \
      return ::hearth::compute::detail::kernel##_avx512(__VA_ARGS__); \
    }                                                                 \
    if ((isa) == ::hearth::compute::Isa::kAvx2) {                     \
      return ::hearth::compute::detail::kernel##_avx2(__VA_ARGS__);   \
    }                                                                 \
  } while (0)
#else
#define HEARTH_RETURN_ISA_VARIANT(isa, kernel, ...) (void)(isa)
#endif
