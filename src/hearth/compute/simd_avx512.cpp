// The compute kernels for AVX-512 (F, BW, VL, DQ) (simd_kernels.inc).
#define HEARTH_SIMD_ISA avx512
#include "hearth/compute/simd_kernels.inc"
