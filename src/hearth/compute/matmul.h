// Weight x activation products over the thread pool: matvec for decode (one token) and
// matmul for prefill (many tokens). Weights are any type quant::is_supported() accepts; the
// activation is quantized once to the weight type's vec_dot_type and shared by all threads.
#pragma once

#include <cstdint>

#include "hearth/compute/thread_pool.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

// A row-major weight matrix as stored in GGUF: `rows` rows of `cols` elements (GGUF ne0 =
// cols), each row row_bytes(type, cols) bytes, rows contiguous. Typically a view into the
// model's mmap.
struct WeightView {
  gguf::TensorType type;
  int64_t rows;
  int64_t cols;
  const void* data;  // (rows, cols) in `type` blocks
};

// y = W x. x: (cols) f32, y: (rows) f32. UsageError if the type is unsupported or cols is
// not a whole number of blocks.
void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y);

// y[t] = W x[t] for each token t. x: (n_tokens, cols) f32, y: (n_tokens, rows) f32.
// Tiled so that each block of weight rows is read from memory once per call and reused from
// cache for every token.
//
// Contract (batched decode relies on it): row t of y is bitwise identical to what matvec
// gives for x[t] alone, for every weight type and ISA; the multi-token kernels compute each
// (row, token) dot with the same operations in the same order as the one-token kernel.
void matmul(ThreadPool& pool, const WeightView& w, const float* x, int64_t n_tokens, float* y);

// ys[k] = ws[k] x for k < n, in one pool dispatch: decode's Q/K/V (or gate/up) projections of
// one normalized row. All matrices must have the same cols (UsageError otherwise); x is
// quantized once per distinct activation type. Each ys[k] is bitwise what matvec(ws[k])
// gives. ys[k]: (ws[k].rows) f32.
void matvec_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, float* const* ys);

// The same with the kernels of a given ISA instead of the active one (tests and benchmarks
// compare ISAs in one process). UsageError if this CPU lacks it.
void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y, quant::Isa isa);
void matmul(ThreadPool& pool, const WeightView& w, const float* x, int64_t n_tokens, float* y,
            quant::Isa isa);
void matvec_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, float* const* ys,
                 quant::Isa isa);

}  // namespace hearth::compute
