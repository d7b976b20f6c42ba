// The compute kernels for AVX2 + FMA + F16C (simd_kernels.inc).
#define HEARTH_SIMD_ISA avx2
#include "hearth/compute/simd_kernels.inc"
