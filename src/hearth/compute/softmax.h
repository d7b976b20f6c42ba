// Numerically stable softmax over rows (max subtracted before exp).
#pragma once

#include <cstdint>

#include "hearth/compute/ops.h"

namespace hearth::compute {

// x: (n_rows, n) f32, in place; each row becomes exp(x - max) / sum(exp(x - max)).
// -inf entries (masked) become 0. A row that is all -inf or holds NaN has no softmax; its
// values are then unspecified (no error is raised on the hot path).
void softmax(float* x, int64_t n_rows, int64_t n, Isa isa = active_isa());

namespace ref {
// Accumulates the sum in double.
void softmax(float* x, int64_t n_rows, int64_t n);
}  // namespace ref

namespace detail {
void softmax_avx2(float* x, int64_t n_rows, int64_t n);
void softmax_avx512(float* x, int64_t n_rows, int64_t n);
}  // namespace detail

}  // namespace hearth::compute
