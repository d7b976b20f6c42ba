// Weight x activation products over the thread pool: matvec for decode (one token) and
// matmul for prefill (many tokens). Weights are any type quant::is_supported() accepts, in
// the GGUF layout or repacked into rows16 groups; the activation is quantized once to the
// weight type's vec_dot_type and shared by all threads.
#pragma once

#include <cstdint>

#include "hearth/compute/thread_pool.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

// A row-major weight matrix as stored in GGUF: `rows` rows of `cols` elements (GGUF ne0 =
// cols), each row row_bytes(type, cols) bytes, rows contiguous. Typically a view into the
// model's mmap.
enum class WeightLayout : uint8_t {
  kGguf,    // rows as stored in GGUF, row_bytes(type, cols) each
  kRows16,  // quant::Rows16 groups of 16 rows (rows % 16 == 0), made at load (repack_rows16)
};

struct WeightView {
  gguf::TensorType type;
  int64_t rows;
  int64_t cols;
  const void* data;  // (rows, cols) in `type` blocks, laid out as `layout` says
  WeightLayout layout = WeightLayout::kGguf;
};

// Bytes of w's rows as a GGUF file stores them (its size in the file mapping).
inline uint64_t gguf_bytes(const WeightView& w) {
  return *gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols)) * static_cast<uint64_t>(w.rows);
}

// Whether `w` can be repacked into the rows16 layout with kernels that are worth it on this
// CPU (the active ISA has SIMD rows16 kernels for the type and rows % 16 == 0).
bool rows16_worthwhile(const WeightView& w);
// Bytes of w's rows16 copy (UsageError if the type has no rows16 layout or rows % 16 != 0).
size_t rows16_bytes(const WeightView& w);
// Repacks a GGUF-layout view into dst (rows16_bytes(w) bytes) over the pool and returns the
// rows16 view of dst. Same values; results differ from the GGUF layout's only in float
// summation order (see quant::Rows16).
WeightView repack_rows16(ThreadPool& pool, const WeightView& w, void* dst);

// y = W x. x: (cols) f32, y: (rows) f32. UsageError if the type is unsupported or cols is
// not a whole number of blocks.
void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y);

// A GGUF-layout row kernel: *out = the dot of one weight row with an activation row.
using RowDotFn = void (*)(int64_t n, const void* w_row, const void* act_row, float* out);
// The same for four weight rows w_stride bytes apart: out[r] = row r's dot, with RowDotFn's bits.
using Rows4DotFn = void (*)(int64_t n, const void* w_rows, size_t w_stride, const void* act_row,
                            float* out);

// The row kernels GGUF-layout matvec runs for type traits tr: rows of w_row_bytes against an
// activation of act_bytes, as tr.prepared leaves it (tr.vec_dot_type's row without one); the
// long-row variants where both pass StreamTuning::long_row_bytes.
struct DecodeRows {
  RowDotFn one;
  Rows4DotFn four;  // null where the type has no four-row kernel
  size_t w_row_bytes;

  // y[r - r0] for rows r0 .. r1 - 1 of the matrix at w: four at a time where `four` exists.
  void run(int64_t n, const uint8_t* w, int64_t r0, int64_t r1, const void* act, float* y) const {
    int64_t r = r0;
    if (four != nullptr) {
      for (; r + 4 <= r1; r += 4) {
        four(n, w + static_cast<size_t>(r) * w_row_bytes, w_row_bytes, act, y + (r - r0));
      }
    }
    for (; r < r1; ++r) one(n, w + static_cast<size_t>(r) * w_row_bytes, act, y + (r - r0));
  }
};
DecodeRows decode_rows(const quant::TypeTraits& tr, size_t w_row_bytes, size_t act_bytes);

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

// ys[k] = ws[k] xs[k] for k < n, in one pool dispatch: each matrix reads its own input (the
// down projections of a token's experts), of that matrix's cols; matrices given the same input
// pointer share its quantization. Each ys[k] is bitwise what matvec(ws[k], xs[k]) gives.
void matvec_each(ThreadPool& pool, const WeightView* ws, int n, const float* const* xs,
                 float* const* ys);

// ys[k] = ws[k] x[t] for every token t and k < n: prefill's Q/K/V (or gate/up) projections of
// the same normalized rows. Matrices in the rows16 layout whose kernels take the same prepared
// activation (Q and K of one type, gate and up) share one quantization and preparation of the
// tokens; the others run as matmul does alone. Each ys[k] is bitwise what matmul(ws[k]) gives.
// All matrices must have the same cols (UsageError otherwise). ys[k]: (n_tokens, ws[k].rows).
void matmul_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, int64_t n_tokens,
                 float* const* ys);

// The same with the kernels of a given ISA instead of the active one (tests and benchmarks
// compare ISAs in one process). UsageError if this CPU lacks it.
void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y, quant::Isa isa);
void matmul(ThreadPool& pool, const WeightView& w, const float* x, int64_t n_tokens, float* y,
            quant::Isa isa);
void matvec_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, float* const* ys,
                 quant::Isa isa);
void matmul_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, int64_t n_tokens,
                 float* const* ys, quant::Isa isa);
void matvec_each(ThreadPool& pool, const WeightView* ws, int n, const float* const* xs,
                 float* const* ys, quant::Isa isa);

}  // namespace hearth::compute
