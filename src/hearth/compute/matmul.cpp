#include "hearth/compute/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include "hearth/base/error.h"
#include "hearth/quant/stream_tuning.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

namespace {

struct Prepared {
  const quant::TypeTraits* w_traits;
  const quant::TypeTraits* act_traits;
  size_t w_row_bytes;
  size_t act_row_bytes;
};

// Per-caller scratch for quantized (slot 0) and packed (slot 1) activations; reused across
// calls so decode allocates nothing in steady state.
std::vector<uint8_t>& activation_scratch(size_t bytes, int slot = 0) {
  thread_local std::vector<uint8_t> buf[2];
  auto& b = buf[slot];
  if (b.size() < bytes) b.resize(bytes);
  return b;
}

Prepared prepare(const WeightView& w, const char* op, quant::Isa isa) {
  const auto& tr = quant::traits_for_isa(w.type, isa);  // UsageError for unsupported types
  if (tr.vec_dot == nullptr) {
    throw UsageError(std::string(op) + ": " + std::string(gguf::tensor_type_name(w.type)) +
                     " is an activation-only type, not a weight type");
  }
  if (w.rows < 0 || w.cols <= 0 || w.data == nullptr) {
    throw UsageError(std::string(op) + ": bad weight view (rows " + std::to_string(w.rows) +
                     ", cols " + std::to_string(w.cols) + ")");
  }
  const auto wrb = gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols));
  const auto arb = gguf::row_bytes(tr.vec_dot_type, static_cast<uint64_t>(w.cols));
  if (!wrb || !arb) {
    throw UsageError(std::string(op) + ": cols " + std::to_string(w.cols) +
                     " is not a whole number of " + std::string(gguf::tensor_type_name(w.type)) +
                     " / " + std::string(gguf::tensor_type_name(tr.vec_dot_type)) + " blocks");
  }
  if (w.layout == WeightLayout::kRows16 && (tr.rows16 == nullptr || w.rows % quant::kRows16 != 0)) {
    throw UsageError(std::string(op) + ": " + std::string(gguf::tensor_type_name(w.type)) +
                     " view with " + std::to_string(w.rows) +
                     " rows cannot be in the rows16 layout");
  }
  return {&tr, &quant::traits_for_isa(tr.vec_dot_type, isa), *wrb, *arb};
}

}  // namespace

DecodeRows decode_rows(const quant::TypeTraits& tr, size_t w_row_bytes, size_t act_bytes) {
  // Where a weight row and the activation row it meets (as the decode kernel reads it) pass
  // StreamTuning::long_row_bytes together, the hardware prefetcher alone streamed the GGUF
  // layout well below the read bandwidth, so decode takes the kernels' long-row variants,
  // which also prefetch into L2.
  const bool long_rows = w_row_bytes + act_bytes > quant::stream_tuning().long_row_bytes;
  if (const quant::PreparedDot* prepared = tr.prepared; prepared != nullptr) {
    return {long_rows && prepared->dot_long != nullptr ? prepared->dot_long : prepared->dot,
            prepared->dot_rows4, w_row_bytes};
  }
  return {long_rows && tr.vec_dot_long != nullptr ? tr.vec_dot_long : tr.vec_dot, tr.vec_dot_rows4,
          w_row_bytes};
}

namespace {

// Thread ti's share of n tokens when nt threads quantize or convert them: one contiguous range
// each. Dealt out in turn, each thread read every other row of the input, which two threads
// did far more slowly than a half each (docs/kernels.md, "Token chunks").
struct TokenRange {
  int64_t begin, end;
};
TokenRange token_share(int64_t n, int ti, int nt) {
  return {n * ti / nt, n * (ti + 1) / nt};
}

// Converts every token's quantized activation row (act_row_bytes apart) into a kernel's
// layout (out_row_bytes apart) over the pool; the result lives in scratch slot 1.
const uint8_t* convert_tokens(ThreadPool& pool, void (*convert)(int64_t, const void*, void*),
                              int64_t cols, const uint8_t* act, size_t act_row_bytes,
                              int64_t n_tokens, size_t out_row_bytes) {
  uint8_t* out = activation_scratch(out_row_bytes * static_cast<size_t>(n_tokens), 1).data();
  pool.run([&](int ti, int nt) {
    const TokenRange share = token_share(n_tokens, ti, nt);
    for (int64_t t = share.begin; t < share.end; ++t) {
      convert(cols, act + static_cast<size_t>(t) * act_row_bytes,
              out + static_cast<size_t>(t) * out_row_bytes);
    }
  });
  return out;
}

// Hands out ranges [begin, end) of `total` units to the pool's threads, guided: each range is
// a share of what remains (remaining / threads, at least `min_units`), so the first ranges
// are long sequential streams for the hardware prefetcher and the last ones are small, and
// the threads finish within a few small ranges of each other. (Fixed ranges of 1/16 of the
// matrix left one thread idle for half a range on average at the end of every matvec.)
// Why remaining / threads and not / (2 * threads): every range boundary breaks a thread's
// stream and restarts its prefetch ramp; the halving divisor makes ~2x as many breaks and
// measured lower (docs/kernels.md, "Work split"). Contiguous per-thread shares with work
// stealing were no better.
class GuidedRanges {
 public:
  GuidedRanges(int64_t total, int n_threads, int64_t min_units)
      : total_(total), divisor_(n_threads), min_units_(std::max<int64_t>(1, min_units)) {}

  bool next(int64_t& begin, int64_t& end) {
    int64_t pos = pos_.load(std::memory_order_relaxed);
    for (;;) {
      if (pos >= total_) return false;
      const int64_t size = std::max(min_units_, (total_ - pos) / divisor_);
      const int64_t stop = std::min(total_, pos + size);
      if (pos_.compare_exchange_weak(pos, stop, std::memory_order_relaxed)) {
        begin = pos;
        end = stop;
        return true;
      }
    }
  }

 private:
  const int64_t total_, divisor_, min_units_;
  std::atomic<int64_t> pos_{0};
};

// Rows16 matvec: the activation is quantized and prepared once, then groups of 16 rows are
// taken in dynamic chunks (as matvec does with rows).
void matvec_rows16(ThreadPool& pool, const WeightView& w, const Prepared& p, const float* x,
                   float* y) {
  const quant::Rows16& r16 = *p.w_traits->rows16;
  auto& qbuf = activation_scratch(p.act_row_bytes);
  p.act_traits->quantize(x, qbuf.data(), w.cols);
  auto& abuf = activation_scratch(r16.act_bytes(w.cols), 1);
  r16.prepare_act(w.cols, qbuf.data(), abuf.data());
  const uint8_t* act = abuf.data();
  const auto* groups = static_cast<const uint8_t*>(w.data);
  const size_t gb = r16.group_bytes(w.cols);
  const int64_t n_groups = w.rows / quant::kRows16;
  // Smallest range: ~64 KiB of weights (two groups at 4096 columns).
  GuidedRanges ranges(n_groups, pool.size(), static_cast<int64_t>((size_t{64} << 10) / gb));
  pool.run_weights([&](int, int) {
    int64_t g0, g1;
    while (ranges.next(g0, g1)) {
      for (int64_t g = g0; g < g1; ++g) {
        r16.dot(w.cols, groups + static_cast<size_t>(g) * gb, act, 0, 1, y + g * quant::kRows16, 0);
      }
    }
  });
}

// Every token's activation quantized and prepared for r16 once, (n_tokens, act_bytes) in
// scratch slot 1. Each token is quantized into a row of the thread's own and prepared from it
// at once, while the row is in L1: quantizing every token first and preparing in a second
// pass wrote and read the quantized rows through memory.
const uint8_t* prepare_rows16_acts(ThreadPool& pool, const quant::Rows16& r16, const Prepared& p,
                                   int64_t cols, const float* x, int64_t n_tokens) {
  const size_t ab = r16.act_bytes(cols);
  uint8_t* acts = activation_scratch(ab * static_cast<size_t>(n_tokens), 1).data();
  const auto quantize = p.act_traits->quantize;
  pool.run([&](int ti, int nt) {
    uint8_t* row = activation_scratch(p.act_row_bytes).data();
    const TokenRange share = token_share(n_tokens, ti, nt);
    for (int64_t t = share.begin; t < share.end; ++t) {
      quantize(x + t * cols, row, cols);
      r16.prepare_act(cols, row, acts + static_cast<size_t>(t) * ab);
    }
  });
  return acts;
}

// Where a matmul unit's rows16 groups come from: the repacked matrix, or GGUF rows repacked
// into a per-thread buffer as the unit starts (gguf_rows16_bits types; see matmul_repacking).
struct UnitSource {
  const uint8_t* data;  // the view's bytes
  size_t group_bytes;   // bytes of one rows16 group
  size_t unit_stride;   // bytes in `data` of one group's rows: group_bytes, or 16 GGUF rows
  bool repack;          // repack each unit's GGUF rows before its passes
};

// Activation bytes a rows16 matmul walks per chunk of tokens: half of a 1 MiB L2, so that a
// chunk's prepared activations stay in L2 while every unit's passes read them. A 512-token
// prompt's are 2.3 MiB at 4096 columns, which every unit would otherwise read from L3
// (docs/kernels.md, "Token chunks").
constexpr size_t kChunkActBytes = size_t{512} << 10;
// But at least this many calls a chunk: every chunk reads the whole matrix again, and with
// rows of 8192 or 14336 columns the budget above left one call (48 tokens), where reading the
// weights 11 times for a 512-token prompt cost more than activations from L3
// (docs/kernels.md, "Token chunks").
constexpr int64_t kMinChunkCalls = 3;

// Tokens per chunk for activation rows of act_bytes: whole calls of call_tokens.
int64_t rows16_chunk_tokens(size_t act_bytes, int64_t call_tokens) {
  const auto calls = static_cast<int64_t>(kChunkActBytes / (act_bytes * call_tokens));
  return std::max(kMinChunkCalls, calls) * call_tokens;
}

// Rows16 matmul outputs of at least this many bytes are streamed to memory where the kernel
// asks for it (Rows16::stream_outputs): each kernel call writes its tokens' rows into a buffer
// of the thread's own, and they go on to the output with non-temporal stores (stream_rows), so
// that no store waits for its line to be read first. An output this large leaves a core's L2
// before the next op reads it anyway; smaller ones (decode batches) are written in place. The
// other kernels write in place: streamed, their outputs were no faster to write and slower for
// the next op to read (docs/kernels.md, "Outputs streamed").
constexpr size_t kStreamOutputBytes = size_t{1} << 20;

#if defined(__x86_64__) || defined(_M_X64)
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;  // not measured elsewhere: outputs are written in place
#endif

// n rows of w floats (w a multiple of 4), src_stride apart at src, to dst_stride apart at dst,
// with non-temporal stores; rows not 16-byte aligned are copied plainly.
void stream_rows(const float* src, int src_stride, int w, float* dst, size_t dst_stride, int n) {
  for (int t = 0; t < n; ++t, src += src_stride, dst += dst_stride) {
#if defined(__x86_64__) || defined(_M_X64)
    if ((reinterpret_cast<uintptr_t>(dst) & 15) == 0) {
      for (int c = 0; c < w; c += 4) _mm_stream_ps(dst + c, _mm_loadu_ps(src + c));
      continue;
    }
#endif
    std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(w));
  }
}

// Non-temporal stores are weakly ordered: each thread fences after its last, so that the pool's
// barrier publishes them to the threads that read the output next.
void stream_fence() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_sfence();
#endif
}

// Rows16 matmul over n_groups groups of 16 rows, token chunk by token chunk
// (rows16_chunk_tokens; one chunk when the units repack GGUF rows, which a second chunk would
// repack again): within a chunk each group is visited once and walks the chunk's tokens
// Rows16::call_tokens at a time (the kernel decodes the weights once per pass of several of
// them, rows16_max_tokens), two groups a unit where the kernel has dot_pair. Each token's bits
// are matvec's (Rows16 contract).
void matmul_rows16_units(ThreadPool& pool, const quant::Rows16& r16, int64_t cols, int64_t rows,
                         int64_t n_groups, const UnitSource& src, const uint8_t* acts,
                         int64_t n_tokens, float* y) {
  const size_t ab = r16.act_bytes(cols);
  const size_t gb = src.group_bytes;
  // Work units of two groups where the kernel has dot_pair (the last one alone if the count
  // is odd), else of one; work items are (chunk, unit), chunk-major.
  const int64_t per_unit = r16.dot_pair != nullptr ? 2 : 1;
  const int64_t n_units = (n_groups + per_unit - 1) / per_unit;
  const int64_t call_tokens = r16.call_tokens;
  const int64_t chunk_tokens = src.repack ? n_tokens : rows16_chunk_tokens(ab, call_tokens);
  const int64_t n_items = n_units * ((n_tokens + chunk_tokens - 1) / chunk_tokens);
  std::atomic<int64_t> next{0};
  const bool stream = kCanStream && r16.stream_outputs &&
                      static_cast<size_t>(n_tokens * rows) * sizeof(float) >= kStreamOutputBytes;
  pool.run_weights([&](int, int) {
    thread_local std::vector<uint8_t> unit_buf;
    // A call's outputs when they are streamed: call_tokens tokens' rows of the unit.
    alignas(64) float call_out[quant::kRows16MaxCallTokens * 2 * quant::kRows16];
    const int unit_cols = static_cast<int>(per_unit) * quant::kRows16;
    if (src.repack && unit_buf.size() < static_cast<size_t>(per_unit) * gb) {
      unit_buf.resize(static_cast<size_t>(per_unit) * gb);
    }
    // Each thread claims its next item before it works on the current one, so that dot_pair
    // can fetch the next item's weights (or GGUF rows) into L2 during the current item's
    // passes.
    int64_t i = next.fetch_add(1, std::memory_order_relaxed);
    while (i < n_items) {
      const int64_t i_next = next.fetch_add(1, std::memory_order_relaxed);
      const int64_t g = (i % n_units) * per_unit;
      const int64_t in_unit = std::min(per_unit, n_groups - g);
      const int64_t t0 = (i / n_units) * chunk_tokens;
      const int64_t t1 = std::min(n_tokens, t0 + chunk_tokens);
      const uint8_t* ahead = nullptr;
      size_t ahead_bytes = 0;
      if (i_next < n_items) {
        const int64_t g_next = (i_next % n_units) * per_unit;
        ahead = src.data + static_cast<size_t>(g_next) * src.unit_stride;
        ahead_bytes = static_cast<size_t>(std::min(per_unit, n_groups - g_next)) * src.unit_stride;
      }
      const uint8_t* w_at = src.data + static_cast<size_t>(g) * src.unit_stride;
      if (src.repack) {
        const size_t row_bytes = src.unit_stride / quant::kRows16;
        for (int64_t k = 0; k < in_unit; ++k) {
          r16.repack(cols, w_at + static_cast<size_t>(k) * src.unit_stride, row_bytes,
                     unit_buf.data() + static_cast<size_t>(k) * gb);
        }
        w_at = unit_buf.data();
      }
      for (int64_t t = t0; t < t1; t += call_tokens) {
        const int n = static_cast<int>(std::min(call_tokens, t1 - t));
        const uint8_t* a_at = acts + static_cast<size_t>(t) * ab;
        float* y_at = y + t * rows + g * quant::kRows16;
        float* out = stream ? call_out : y_at;
        const size_t out_stride =
            stream ? static_cast<size_t>(unit_cols) : static_cast<size_t>(rows);
        if (in_unit == 2) {
          // This call's share of the next item's weights, in proportion to its tokens.
          const auto share = [&](int64_t tt) {
            return ahead_bytes * static_cast<size_t>(tt - t0) / static_cast<size_t>(t1 - t0);
          };
          const size_t from = share(t), to = share(t + n);
          r16.dot_pair(cols, w_at, a_at, ab, n, out, out_stride,
                       ahead == nullptr ? nullptr : ahead + from, to - from);
        } else {
          r16.dot(cols, w_at, a_at, ab, n, out, out_stride);
        }
        if (stream) {
          stream_rows(call_out, unit_cols, static_cast<int>(in_unit) * quant::kRows16, y_at,
                      static_cast<size_t>(rows), n);
        }
      }
      i = i_next;
    }
    if (stream) stream_fence();
  });
}

// Matmul of a rows16 view w (r16 its layout) on tokens already prepared for it.
void matmul_rows16_prepared(ThreadPool& pool, const WeightView& w, const quant::Rows16& r16,
                            const uint8_t* acts, int64_t n_tokens, float* y) {
  const size_t gb = r16.group_bytes(w.cols);
  matmul_rows16_units(pool, r16, w.cols, w.rows, w.rows / quant::kRows16,
                      {static_cast<const uint8_t*>(w.data), gb, gb, false}, acts, n_tokens, y);
}

void matmul_rows16(ThreadPool& pool, const WeightView& w, const Prepared& p, const float* x,
                   int64_t n_tokens, float* y) {
  const quant::Rows16& r16 = *p.w_traits->rows16;
  matmul_rows16_prepared(pool, w, r16, prepare_rows16_acts(pool, r16, p, w.cols, x, n_tokens),
                         n_tokens, y);
}

// Prefill on GGUF rows (a ring device streaming its windows from the file never repacks):
// each unit's 16 or 32 GGUF rows are repacked into a per-thread rows16 buffer as the unit
// starts, and the rows16 kernels walk the tokens there. The repack costs one pass over the
// weights, against the tokens' passes it serves; the GGUF-layout matmul kernels reached a
// fraction of rows16's (docs/kernels.md, "GGUF-layout prefill"). Only for types whose GGUF
// kernels give rows16's bits (gguf_rows16_bits), so every token still gets matvec's bits; the
// rows after the last whole group take vec_dot, with the same bits.
void matmul_repacking(ThreadPool& pool, const WeightView& w, const Prepared& p, const float* x,
                      int64_t n_tokens, float* y) {
  const quant::Rows16& r16 = *p.w_traits->rows16;
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  const int64_t n_groups = w.rows / quant::kRows16;
  if (n_groups > 0) {
    const uint8_t* acts = prepare_rows16_acts(pool, r16, p, w.cols, x, n_tokens);
    matmul_rows16_units(pool, r16, w.cols, w.rows, n_groups,
                        {wbytes, r16.group_bytes(w.cols), quant::kRows16 * p.w_row_bytes, true},
                        acts, n_tokens, y);
  }
  const int64_t r0 = n_groups * quant::kRows16;
  if (r0 == w.rows) return;
  pool.run([&](int ti, int nt) {
    uint8_t* act = activation_scratch(p.act_row_bytes).data();
    const TokenRange share = token_share(n_tokens, ti, nt);
    for (int64_t t = share.begin; t < share.end; ++t) {
      p.act_traits->quantize(x + t * w.cols, act, w.cols);
      for (int64_t r = r0; r < w.rows; ++r) {
        p.w_traits->vec_dot(w.cols, wbytes + static_cast<size_t>(r) * p.w_row_bytes, act,
                            y + t * w.rows + r);
      }
    }
  });
}

}  // namespace

void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y) {
  matvec(pool, w, x, y, quant::active_isa());
}

void matmul(ThreadPool& pool, const WeightView& w, const float* x, int64_t n_tokens, float* y) {
  matmul(pool, w, x, n_tokens, y, quant::active_isa());
}

void matvec(ThreadPool& pool, const WeightView& w, const float* x, float* y, quant::Isa isa) {
  const Prepared p = prepare(w, "matvec", isa);
  if (w.layout == WeightLayout::kRows16) {
    matvec_rows16(pool, w, p, x, y);
    return;
  }
  const void* act = x;  // (cols) in vec_dot_type
  if (p.act_traits->type != gguf::TensorType::kF32) {
    auto& buf = activation_scratch(p.act_row_bytes);
    p.act_traits->quantize(x, buf.data(), w.cols);
    act = buf.data();
  }
  size_t act_bytes = p.act_row_bytes;
  const quant::PreparedDot* pd = p.w_traits->prepared;
  if (pd != nullptr) {
    // Rearranged once here instead of per weight row (same bits, see PreparedDot).
    act_bytes = pd->bytes(w.cols);
    auto& pbuf = activation_scratch(act_bytes, 1);
    pd->prepare(w.cols, act, pbuf.data());
    act = pbuf.data();
  }
  const DecodeRows decode = decode_rows(*p.w_traits, p.w_row_bytes, act_bytes);
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  const int nt = pool.size();
  // Guided ranges of contiguous rows (long streams first, small ones last; they also absorb
  // a thread being descheduled); the smallest is ~64 KiB of weights. No burst of software
  // prefetches a row ahead here: side by side it made these kernels slower, most on long rows;
  // the kernels that prefetch do it beside their loads (docs/kernels.md, "GGUF-layout
  // streaming").
  // Units of four rows where the type has a four-row kernel, so that no range leaves rows to
  // the one-row kernel but the matrix's last.
  const int64_t unit = decode.four != nullptr ? 4 : 1;
  const int64_t min_rows =
      std::max<int64_t>(4, static_cast<int64_t>((size_t{64} << 10) / p.w_row_bytes));
  GuidedRanges ranges((w.rows + unit - 1) / unit, nt, (min_rows + unit - 1) / unit);
  pool.run_weights([&](int, int) {
    int64_t u0, u1;
    while (ranges.next(u0, u1)) {
      const int64_t r0 = u0 * unit, r1 = std::min(w.rows, u1 * unit);
      decode.run(w.cols, wbytes, r0, r1, act, y + r0);
    }
  });
}

void matvec_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, float* const* ys) {
  matvec_many(pool, ws, n, x, ys, quant::active_isa());
}

namespace {

// UsageError unless every matrix has matrix 0's columns.
void check_same_cols(const char* op, const WeightView* ws, int n) {
  for (int k = 1; k < n; ++k) {
    if (ws[k].cols != ws[0].cols) {
      throw UsageError(std::string(op) + ": matrix " + std::to_string(k) + " has " +
                       std::to_string(ws[k].cols) + " columns, matrix 0 has " +
                       std::to_string(ws[0].cols));
    }
  }
}

}  // namespace

void matmul_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, int64_t n_tokens,
                 float* const* ys) {
  matmul_many(pool, ws, n, x, n_tokens, ys, quant::active_isa());
}

void matmul_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, int64_t n_tokens,
                 float* const* ys, quant::Isa isa) {
  check_same_cols("matmul_many", ws, n);
  if (n_tokens == 1) {
    matvec_many(pool, ws, n, x, ys, isa);
    return;
  }
  std::vector<Prepared> p;
  p.reserve(static_cast<size_t>(std::max(n, 0)));
  for (int k = 0; k < n; ++k) p.push_back(prepare(ws[k], "matmul_many", isa));
  if (n_tokens <= 0) return;
  std::vector<bool> done(static_cast<size_t>(n), false);
  for (int k = 0; k < n; ++k) {
    if (done[k]) continue;
    if (ws[k].layout != WeightLayout::kRows16) {
      matmul(pool, ws[k], x, n_tokens, ys[k], isa);
      continue;
    }
    // The tokens prepared once for matrix k and every later one that reads them the same way
    // (prepare_rows16_acts' scratch stays untouched until the last of them is done).
    const quant::Rows16& r16 = *p[k].w_traits->rows16;
    const uint8_t* acts = prepare_rows16_acts(pool, r16, p[k], ws[k].cols, x, n_tokens);
    for (int j = k; j < n; ++j) {
      if (done[j] || ws[j].layout != WeightLayout::kRows16) continue;
      const quant::Rows16& rj = *p[j].w_traits->rows16;
      if (rj.prepare_act != r16.prepare_act || p[j].act_traits != p[k].act_traits) continue;
      matmul_rows16_prepared(pool, ws[j], rj, acts, n_tokens, ys[j]);
      done[j] = true;
    }
  }
}

void matvec_many(ThreadPool& pool, const WeightView* ws, int n, const float* x, float* const* ys,
                 quant::Isa isa) {
  check_same_cols("matvec_many", ws, n);
  thread_local std::vector<const float*> xs;
  xs.assign(static_cast<size_t>(std::max(n, 0)), x);
  matvec_each(pool, ws, n, xs.data(), ys, isa);
}

void matvec_each(ThreadPool& pool, const WeightView* ws, int n, const float* const* xs,
                 float* const* ys) {
  matvec_each(pool, ws, n, xs, ys, quant::active_isa());
}

void matvec_each(ThreadPool& pool, const WeightView* ws, int n, const float* const* xs,
                 float* const* ys, quant::Isa isa) {
  if (n <= 0) return;
  // How a matrix reads its activation: quantized to act_traits' type, then prepared by
  // `prepared` (GGUF layout) or `rows16` (rows16 layout), or neither. Matrices with the same
  // form share one buffer (Q/K/V or gate/up usually do).
  struct Item {
    Prepared p;
    const quant::PreparedDot* prepared;  // GGUF-layout decode preparation, if any
    const quant::Rows16* rows16;         // rows16 layout, if the view is in it
    const float* x;                      // the activation as given
    const void* act;                     // the activation in this item's form
    DecodeRows decode;                   // GGUF layout: the row kernels
  };
  thread_local std::vector<Item> items;
  thread_local std::vector<std::vector<uint8_t>> act_bufs;  // one per distinct form (+ its raw)
  items.clear();
  size_t n_bufs = 0;
  auto buffer = [&](size_t bytes) {
    if (act_bufs.size() < n_bufs + 1) act_bufs.resize(n_bufs + 1);
    auto& buf = act_bufs[n_bufs++];
    if (buf.size() < bytes) buf.resize(bytes);
    return buf.data();
  };
  for (int k = 0; k < n; ++k) {
    const float* x = xs[k];
    Item it{prepare(ws[k], "matvec_many", isa), nullptr, nullptr, x, x, {}};
    if (ws[k].layout == WeightLayout::kRows16) {
      it.rows16 = it.p.w_traits->rows16;
    } else {
      it.prepared = it.p.w_traits->prepared;
      it.decode =
          decode_rows(*it.p.w_traits, it.p.w_row_bytes,
                      it.prepared != nullptr ? it.prepared->bytes(ws[k].cols) : it.p.act_row_bytes);
    }
    if (it.p.act_traits->type != gguf::TensorType::kF32 || it.rows16 != nullptr) {
      for (int j = 0; j < k && it.act == x; ++j) {
        const Item& o = items[static_cast<size_t>(j)];
        if (o.x == x && o.p.act_traits == it.p.act_traits && o.prepared == it.prepared &&
            o.rows16 == it.rows16 && ws[j].cols == ws[k].cols) {
          it.act = o.act;
        }
      }
      if (it.act == x) {
        const int64_t cols = ws[k].cols;
        const void* raw = x;
        if (it.p.act_traits->type != gguf::TensorType::kF32) {
          uint8_t* q = buffer(it.p.act_row_bytes);
          it.p.act_traits->quantize(x, q, cols);
          raw = q;
        }
        it.act = raw;
        if (it.prepared != nullptr) {
          uint8_t* pb = buffer(it.prepared->bytes(cols));
          it.prepared->prepare(cols, raw, pb);
          it.act = pb;
        } else if (it.rows16 != nullptr) {
          uint8_t* pb = buffer(it.rows16->act_bytes(cols));
          it.rows16->prepare_act(cols, raw, pb);
          it.act = pb;
        }
      }
    }
    items.push_back(it);
  }
  // One guided range space over all matrices, in units of 16 rows (a rows16 group; a GGUF
  // matrix's last unit may be shorter), so one pool dispatch covers them all and the threads
  // finish together. unit_start[k] is matrix k's first unit.
  thread_local std::vector<int64_t> unit_start;
  unit_start.assign(static_cast<size_t>(n) + 1, 0);
  for (int k = 0; k < n; ++k) {
    unit_start[static_cast<size_t>(k) + 1] =
        unit_start[static_cast<size_t>(k)] + (ws[k].rows + quant::kRows16 - 1) / quant::kRows16;
  }
  const int64_t unit_bytes = static_cast<int64_t>(items[0].p.w_row_bytes) * quant::kRows16;
  GuidedRanges ranges(unit_start[static_cast<size_t>(n)], pool.size(),
                      std::max<int64_t>(1, (int64_t{64} << 10) / unit_bytes));
  const Item* its = items.data();
  const int64_t* starts = unit_start.data();
  pool.run_weights([&](int, int) {
    int64_t u0, u1;
    while (ranges.next(u0, u1)) {
      int k = static_cast<int>(std::upper_bound(starts, starts + n + 1, u0) - starts) - 1;
      for (; k < n && starts[k] < u1; ++k) {
        const Item& it = its[k];
        const WeightView& w = ws[k];
        const int64_t r0 = (std::max(u0, starts[k]) - starts[k]) * quant::kRows16;
        const int64_t r1 =
            std::min(w.rows, (std::min(u1, starts[k + 1]) - starts[k]) * quant::kRows16);
        const auto* wbytes = static_cast<const uint8_t*>(w.data);
        if (it.rows16 != nullptr) {
          const size_t gb = it.rows16->group_bytes(w.cols);
          for (int64_t r = r0; r < r1; r += quant::kRows16) {
            it.rows16->dot(w.cols, wbytes + static_cast<size_t>(r / quant::kRows16) * gb, it.act, 0,
                           1, ys[k] + r, 0);
          }
          continue;
        }
        it.decode.run(w.cols, wbytes, r0, r1, it.act, ys[k] + r0);
      }
    }
  });
}

bool rows16_worthwhile(const WeightView& w) {
  if (w.layout != WeightLayout::kGguf || w.rows <= 0 || w.rows % quant::kRows16 != 0) return false;
  if (!quant::is_supported(w.type)) return false;
  const auto& tr = quant::traits(w.type);
  return tr.rows16 != nullptr && tr.rows16_fast &&
         gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols)).has_value();
}

size_t rows16_bytes(const WeightView& w) {
  const auto& tr = quant::traits(w.type);
  if (tr.rows16 == nullptr || w.rows <= 0 || w.rows % quant::kRows16 != 0 ||
      !gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols))) {
    throw UsageError("rows16: a " + std::string(gguf::tensor_type_name(w.type)) + " matrix of " +
                     std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                     " has no rows16 layout");
  }
  return static_cast<size_t>(w.rows / quant::kRows16) * tr.rows16->group_bytes(w.cols);
}

WeightView repack_rows16(ThreadPool& pool, const WeightView& w, void* dst) {
  if (w.layout != WeightLayout::kGguf) throw UsageError("rows16: view is already repacked");
  (void)rows16_bytes(w);  // validates type and shape (UsageError)
  const quant::Rows16& r16 = *quant::traits(w.type).rows16;
  const size_t rb = *gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols));
  const size_t gb = r16.group_bytes(w.cols);
  const int64_t n_groups = w.rows / quant::kRows16;
  const auto* src = static_cast<const uint8_t*>(w.data);
  auto* out = static_cast<uint8_t*>(dst);
  pool.run([&](int ti, int nt) {
    for (int64_t g = ti; g < n_groups; g += nt) {
      r16.repack(w.cols, src + static_cast<size_t>(g) * quant::kRows16 * rb, rb,
                 out + static_cast<size_t>(g) * gb);
    }
  });
  return WeightView{w.type, w.rows, w.cols, dst, WeightLayout::kRows16};
}

namespace {

// Prefill through a PackedDot: activations packed once per call, each work item packs its
// rows of weights into per-thread scratch, then walks the tokens four at a time with the
// packed kernel (a token quad's packed activations, ~18 KiB for 4096 columns, stay in L1
// while the item's rows are visited). Leftover tokens use vec_dot on the unpacked rows, which
// gives the same bits.
void matmul_packed(ThreadPool& pool, const WeightView& w, const Prepared& p, const uint8_t* act,
                   int64_t n_tokens, float* y) {
  const quant::PackedDot& pk = *p.w_traits->packed;
  const size_t pab = pk.a_row_bytes(w.cols);
  const size_t pwb = pk.w_row_bytes(w.cols);
  // (n_tokens, pab) packed activations
  const uint8_t* packed_act =
      convert_tokens(pool, pk.pack_a, w.cols, act, p.act_row_bytes, n_tokens, pab);
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  // 16 rows per item (~80 KiB packed at 4096 columns: L2), fewer if that leaves < 4 items
  // per thread.
  const int64_t rows_per_item = std::clamp<int64_t>(w.rows / (4 * pool.size()), 1, 16);
  const int64_t n_items = (w.rows + rows_per_item - 1) / rows_per_item;
  const int64_t quads_end = n_tokens / 4 * 4;
  std::atomic<int64_t> next{0};
  pool.run_weights([&](int, int) {
    thread_local std::vector<uint8_t> wscratch;
    if (wscratch.size() < pwb * static_cast<size_t>(rows_per_item)) {
      wscratch.resize(pwb * static_cast<size_t>(rows_per_item));
    }
    uint8_t* packed_w = wscratch.data();  // (rows_per_item, pwb) packed weight rows
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= n_items) break;
      const int64_t r0 = item * rows_per_item;
      const int64_t r1 = std::min(w.rows, r0 + rows_per_item);
      for (int64_t r = r0; r < r1; ++r) {
        pk.pack_w(w.cols, wbytes + static_cast<size_t>(r) * p.w_row_bytes,
                  packed_w + static_cast<size_t>(r - r0) * pwb);
      }
      for (int64_t t = 0; t < quads_end; t += 4) {
        for (int64_t r = r0; r < r1; ++r) {
          float o[4];
          pk.dot_x4(w.cols, packed_w + static_cast<size_t>(r - r0) * pwb,
                    packed_act + static_cast<size_t>(t) * pab, pab, o);
          for (int k = 0; k < 4; ++k) y[(t + k) * w.rows + r] = o[k];
        }
      }
      for (int64_t t = quads_end; t < n_tokens; ++t) {
        for (int64_t r = r0; r < r1; ++r) {
          p.w_traits->vec_dot(w.cols, wbytes + static_cast<size_t>(r) * p.w_row_bytes,
                              act + static_cast<size_t>(t) * p.act_row_bytes, y + t * w.rows + r);
        }
      }
    }
  });
}

}  // namespace

void matmul(ThreadPool& pool, const WeightView& w, const float* x, int64_t n_tokens, float* y,
            quant::Isa isa) {
  if (n_tokens == 1) {
    matvec(pool, w, x, y, isa);
    return;
  }
  const Prepared p = prepare(w, "matmul", isa);
  if (n_tokens <= 0) return;
  if (w.layout == WeightLayout::kRows16) {
    matmul_rows16(pool, w, p, x, n_tokens, y);
    return;
  }
  if (p.w_traits->gguf_rows16_bits && p.w_traits->rows16_fast &&
      n_tokens >= p.w_traits->rows16->repack_min_tokens) {
    matmul_repacking(pool, w, p, x, n_tokens, y);
    return;
  }
  // (n_tokens, act_row_bytes) quantized activations, or x itself for f32.
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  if (p.act_traits->type != gguf::TensorType::kF32) {
    auto& buf = activation_scratch(p.act_row_bytes * static_cast<size_t>(n_tokens));
    uint8_t* dst = buf.data();
    const auto quantize = p.act_traits->quantize;
    pool.run([&](int ti, int nt) {
      const TokenRange share = token_share(n_tokens, ti, nt);
      for (int64_t t = share.begin; t < share.end; ++t) {
        quantize(x + t * w.cols, dst + static_cast<size_t>(t) * p.act_row_bytes, w.cols);
      }
    });
    act = dst;
  }
  if (p.w_traits->packed != nullptr && n_tokens >= 4) {
    matmul_packed(pool, w, p, act, n_tokens, y);
    return;
  }
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  auto vec_dot = p.w_traits->vec_dot;
  auto vec_dot_x4 = p.w_traits->vec_dot_x4;  // four tokens per weight decode, if any
  size_t act_row_bytes = p.act_row_bytes;
  if (const quant::PreparedDot* pd = p.w_traits->prepared; pd != nullptr && vec_dot_x4 == nullptr) {
    // Every token's activation rearranged once for the prepared kernels, as matvec does (same
    // bits as vec_dot, PreparedDot's contract); Q4_0's plain kernel is compute-bound.
    act_row_bytes = pd->bytes(w.cols);
    act = convert_tokens(pool, pd->prepare, w.cols, act, p.act_row_bytes, n_tokens, act_row_bytes);
    vec_dot = pd->dot;
    vec_dot_x4 = pd->dot_x4;
  }
  // Tiles: a block of weight rows (<= ~32 KiB, stays in L1/L2) x a tile of tokens (their
  // activations, <= ~256 KiB, stay in L2). Work items walk all token tiles of one row block
  // before the next, so each weight byte comes from DRAM once.
  const int64_t row_block =
      std::clamp<int64_t>(static_cast<int64_t>((32u << 10) / p.w_row_bytes), 1, 64);
  const int64_t token_tile =
      std::clamp<int64_t>(static_cast<int64_t>((256u << 10) / act_row_bytes), 1, n_tokens);
  const int64_t n_row_blocks = (w.rows + row_block - 1) / row_block;
  const int64_t n_token_tiles = (n_tokens + token_tile - 1) / token_tile;
  const int64_t n_items = n_row_blocks * n_token_tiles;
  std::atomic<int64_t> next{0};
  pool.run_weights([&](int, int) {
    for (;;) {
      const int64_t item = next.fetch_add(1, std::memory_order_relaxed);
      if (item >= n_items) break;
      const int64_t r0 = (item / n_token_tiles) * row_block;
      const int64_t r1 = std::min(w.rows, r0 + row_block);
      const int64_t t0 = (item % n_token_tiles) * token_tile;
      const int64_t t1 = std::min(n_tokens, t0 + token_tile);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* wrow = wbytes + static_cast<size_t>(r) * p.w_row_bytes;
        int64_t t = t0;
        if (vec_dot_x4 != nullptr) {
          for (; t + 4 <= t1; t += 4) {
            float o[4];
            vec_dot_x4(w.cols, wrow, act + static_cast<size_t>(t) * act_row_bytes, act_row_bytes,
                       o);
            for (int k = 0; k < 4; ++k) y[(t + k) * w.rows + r] = o[k];
          }
        }
        for (; t < t1; ++t) {
          vec_dot(w.cols, wrow, act + static_cast<size_t>(t) * act_row_bytes, y + t * w.rows + r);
        }
      }
    }
  });
}

}  // namespace hearth::compute
