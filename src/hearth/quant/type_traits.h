// One traits table per tensor type drives every dequantize / quantize / dot product in
// hearth; the dot kernel is chosen once per process for the CPU (see Isa). Callers:
//   const auto& tr = quant::traits(w.type);
//   const auto& act = quant::traits(tr.vec_dot_type);
//   act.quantize(x, act_row, n);            // once per activation row
//   tr.vec_dot(n, w_row, act_row, &y_r);    // per weight row
//
// Activation formats (vec_dot_type):
//   Q4_K, Q5_K, Q6_K -> Q8_K (per-256 f32 scale + group sums, so mins/offsets cost nothing)
//   Q8_0, Q4_0       -> Q8_0 (same 32-element blocks as the weights)
//   F32, F16, BF16   -> F32  (activations stay exact; the weights dominate the bytes)
//   Q8_K             -> no dot (activation-only type); to_float/quantize work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hearth/gguf/tensor_type.h"

namespace hearth::quant {

using gguf::TensorType;

// Optional prefill path for a weight type on one ISA: weight rows and activation rows are
// repacked once per matmul call into a layout whose kernel keeps whole blocks in SIMD lanes,
// so no per-block shuffles are paid per token. Contract: dot_x4 gives every token exactly
// the bits vec_dot gives on the unpacked rows (same integer sums, same float operations in
// the same order), so matmul and matvec agree bitwise.
struct PackedDot {
  size_t (*w_row_bytes)(int64_t n);  // bytes of one packed weight row of n elements
  size_t (*a_row_bytes)(int64_t n);  // bytes of one packed activation row
  void (*pack_w)(int64_t n, const void* w_row, void* dst);    // w_row in the weight type
  void (*pack_a)(int64_t n, const void* act_row, void* dst);  // act_row in vec_dot_type
  // out[t] = dot(w, act t) for t < 4; packed activation rows at a_stride bytes.
  void (*dot_x4)(int64_t n, const void* packed_w, const void* packed_a, size_t a_stride,
                 float* out);
};

// Optional decode path: the activation row (vec_dot_type) is rearranged once per matvec into
// a layout the kernel reads with aligned loads, then dot() runs per weight row. Same
// contract as PackedDot: dot() gives the bits vec_dot gives on the unprepared row.
struct PreparedDot {
  size_t (*bytes)(int64_t n);  // bytes of one prepared activation row of n elements
  void (*prepare)(int64_t n, const void* act_row, void* dst);
  void (*dot)(int64_t n, const void* w_row, const void* prepared_act, float* out);
  // Optional: dot() for long rows, same bits (see TypeTraits::vec_dot_long).
  void (*dot_long)(int64_t n, const void* w_row, const void* prepared_act, float* out) = nullptr;
  // Optional: dot() of one weight row against four prepared activation rows (act_stride bytes
  // apart), out[t] with dot()'s bits for each: GGUF-layout prefill decodes the weights once
  // per four tokens (as TypeTraits::vec_dot_x4 does on plain activation rows).
  void (*dot_x4)(int64_t n, const void* w_row, const void* prepared_acts, size_t act_stride,
                 float* out) = nullptr;
  // Optional: dot() of four weight rows (w_stride bytes apart, from w_rows) against one
  // prepared activation row, out[r] with dot()'s bits for row r. Decode (matvec) takes rows
  // four at a time with it, at every row length: four rows' float steps side by side cost
  // less than one row's after the other. It prefetches its weights itself (four interleaved
  // streams leave the hardware prefetcher behind), so there is no long-row variant.
  void (*dot_rows4)(int64_t n, const void* w_rows, size_t w_stride, const void* prepared_act,
                    float* out) = nullptr;
};

// Optional row-interleaved weight layout ("rows16"), made once at model load: 16 consecutive
// rows are stored block column by block column, so that one 512-bit vector holds 4 bytes of
// each of the 16 rows and a kernel keeps one row per SIMD lane. The per-block scale of each
// row then applies lane-wise, with no horizontal reductions per block, which leaves the
// decode loop light enough to overlap fully with DRAM streaming (the GGUF-layout kernels
// are bound by their per-block shuffles). Each type documents its group layout in
// quant/rows16_<type>.cpp. Matrices whose row count is not a multiple of 16 stay in the
// GGUF layout.
//
// Contract: dot() gives each (row, token) the same bits whatever n_tokens and whatever ISA,
// the scalar one included: every lane runs the scalar reference's integer sums and float
// operations in the same order. These are also the bits of vec_dot on the GGUF rows
// (TypeTraits::gguf_rows16_bits: the GGUF kernels take the same float steps, block_steps.h).
constexpr int kRows16 = 16;
// Tokens matmul passes per Rows16::dot call: a multiple of every kernel's tokens per pass
// over the weights (8, 4, 3 for the Q4_K pair kernel, 16 for AMX tiles), so no pass runs
// short but the last.
constexpr int kRows16CallTokens = 48;
// The most tokens any Rows16::call_tokens asks for.
constexpr int kRows16MaxCallTokens = 96;
struct Rows16 {
  size_t (*group_bytes)(int64_t cols);  // bytes of one group of 16 rows of cols elements
  // Repacks rows [0, 16) of src (GGUF rows, src_row_bytes apart) into one group.
  void (*repack)(int64_t cols, const void* src, size_t src_row_bytes, void* group);
  // The inverse: the 16 GGUF rows of a group, dst_row_bytes apart.
  void (*unpack)(int64_t cols, const void* group, void* dst, size_t dst_row_bytes);
  size_t (*act_bytes)(int64_t cols);  // bytes of one prepared activation row
  // Prepares one activation row (in the weight type's vec_dot_type) for dot().
  void (*prepare_act)(int64_t cols, const void* act_row, void* dst);
  // out[t * out_stride + r] = dot(row r of the group, prepared activation t) for r < 16 and
  // t < n_tokens (any count; kRows16CallTokens per call is what matmul passes); prepared
  // rows act_stride bytes apart.
  void (*dot)(int64_t cols, const void* group, const void* acts, size_t act_stride, int n_tokens,
              float* out, size_t out_stride);
  // Optional (nullptr where the ISA has none): dot on two adjacent groups at once, the second
  // group_bytes(cols) after the first and its rows at out[t * out_stride + 16 + r], with the
  // bits dot gives each group. Each activation quant loaded serves both groups: on AVX-512
  // the one-group kernels load an activation broadcast per vpdpbusd, and the loads, not the
  // multiply-adds, bound them (docs/kernels.md, "Two groups per pass"). Matmul uses it.
  // next, next_bytes: memory the caller reads after this call (its next pair's weights, or a
  // share of them), which the kernel fetches into L2 spread over its passes; nullptr and 0
  // for none. A hint only: the results do not depend on it.
  void (*dot_pair)(int64_t cols, const void* groups, const void* acts, size_t act_stride,
                   int n_tokens, float* out, size_t out_stride, const void* next,
                   size_t next_bytes) = nullptr;
  // dot_pair holds more sums than the ISA has registers and keeps some on the stack across its
  // passes. Those spills are stores, and stores leave the core in order: behind the stores of
  // the output rows, which miss the caches (matmul's rows lie a whole output row apart), they
  // stall the kernel. Matmul then has the kernel write into a buffer of the thread's own and
  // streams that on to the output (compute/matmul.cpp, docs/kernels.md "Outputs streamed").
  bool stream_outputs = false;
  // Fewest tokens for which matmul repacks GGUF rows into groups on the fly with `repack`
  // (compute/matmul.cpp, matmul_repacking) rather than running the GGUF-layout kernels on them:
  // the repack costs a pass over the weights at a few times the cost of reading them, which
  // the kernels here win back over enough tokens. 12 with the scalar repacks; the registry
  // sets it with each SIMD repack (break-even points in docs/kernels.md, "GGUF-layout
  // prefill").
  int64_t repack_min_tokens = 12;
  // Tokens matmul passes per dot / dot_pair call: kRows16CallTokens, or more (up to
  // kRows16MaxCallTokens) where the kernel gains from longer calls. The K-quants' AMX tile
  // kernels prepare each block column's weights once per call for all its tiles of 16 tokens
  // (docs/kernels.md, "K-quants on tiles").
  int call_tokens = kRows16CallTokens;
};

struct TypeTraits {
  TensorType type;
  TensorType vec_dot_type;  // format the dot product expects for the activation row
  // Dequantizes n elements (n a multiple of the block size). Bit-exact to the format.
  void (*to_float)(const void* src, float* dst, int64_t n);
  // Quantizer: writes n / block_elems valid blocks. The reference, except the activation
  // types Q8_K / Q8_0 on AVX2 / AVX-512, whose SIMD quantizers give the same bytes.
  void (*quantize)(const float* src, void* dst, int64_t n);
  // *out = dot(w_row, act_row) over n elements; act_row is in vec_dot_type. nullptr for
  // activation-only types.
  void (*vec_dot)(int64_t n, const void* w_row, const void* act_row, float* out);
  // Optional (nullptr when this ISA has none): out[t] = dot(w_row, act_rows + t * act_stride
  // bytes) for t = 0..3, decoding the weights once for four activation rows. Prefill uses it.
  void (*vec_dot_x4)(int64_t n, const void* w_row, const void* act_rows, size_t act_stride,
                     float* out) = nullptr;
  // Optional (nullptr when this ISA has none): vec_dot with the same bits that also prefetches
  // the weights a few KiB ahead into L2. Matvec uses it on rows so long that the row and the
  // activation it meets no longer share L1 (compute::matvec's long_rows): there the hardware
  // prefetcher alone left decode well below the read bandwidth, while on short rows the
  // extra prefetches cost more than they gave (docs/kernels.md, "GGUF-layout streaming").
  void (*vec_dot_long)(int64_t n, const void* w_row, const void* act_row, float* out) = nullptr;
  // Optional: vec_dot of four weight rows (w_stride bytes apart) against one activation row,
  // out[r] with vec_dot's bits for row r; decode takes rows four at a time with it, at every
  // row length, as with PreparedDot::dot_rows4 (which types with a PreparedDot use instead).
  void (*vec_dot_rows4)(int64_t n, const void* w_rows, size_t w_stride, const void* act_row,
                        float* out) = nullptr;
  const PackedDot* packed = nullptr;      // optional, see PackedDot
  const PreparedDot* prepared = nullptr;  // optional, see PreparedDot
  // Row-interleaved layout (see Rows16): the scalar kernels in the scalar table, this ISA's
  // in its table, and the scalar ones again where the ISA has none (rows16_fast says which).
  // nullptr when the type has no such layout.
  const Rows16* rows16 = nullptr;
  bool rows16_fast = false;  // rows16 has SIMD kernels on this ISA (worth repacking for)
  // vec_dot, vec_dot_long and vec_dot_x4 give each GGUF row the bits rows16->dot gives it
  // repacked (they take the same float steps per block, block_steps.h). Then the two layouts
  // agree bitwise, and matmul may repack GGUF rows into rows16 groups on the fly and still
  // give every token matvec's bits.
  bool gguf_rows16_bits = false;
};

enum class Isa { kScalar, kAvx2, kAvx512, kNeon, kNeonDotprod };

// Chosen once from CPUID / HWCAP: AVX-512 needs F+BW+VL+DQ+VNNI, AVX2 needs AVX2+FMA+F16C.
// HEARTH_ISA=scalar|avx2|avx512|neon|dotprod forces one (UsageError if this CPU lacks it).
Isa active_isa();
// The best level this CPU runs, or the one HEARTH_ISA forces, read now (active_isa() keeps the
// first answer). The process's only ISA detection: compute::active_isa() follows it.
// UsageError for an unknown or unsupported HEARTH_ISA.
Isa detect_isa();
bool isa_supported(Isa isa);
const char* isa_name(Isa isa);
// AMX-INT8 tiles: the CPU has them (CPUID), the OS saves their state (XCR0) and, on Linux,
// granted this process their use (arch_prctl). Asked once; false off x86-64 Linux.
bool amx_usable();
// Whether the AVX-512 table takes the AMX kernels (rows16 pairs of 16 tokens): amx_usable()
// unless HEARTH_AMX=0 (for side-by-side runs; docs/kernels.md, "AMX tiles"). UsageError for a
// HEARTH_AMX other than 0 or 1.
bool amx_enabled();
// Whether matmul runs them in this process: amx_enabled() and the AVX-512 table active (the
// tiles sit beside its kernels; another ISA forced with HEARTH_ISA leaves them unused).
bool amx_in_matmul();
// Where matmul runs AMX tiles for `type` (amx_in_matmul() and an AMX kernel for the type): its
// rows16 functions with the AVX-512 VNNI pair kernel in the AMX one's place, so that a benchmark
// can time the two side by side in one run. nullptr otherwise.
const Rows16* rows16_vnni_beside_amx(TensorType type);

// Traits for the active ISA; throws UsageError naming the type if hearth cannot compute with it.
const TypeTraits& traits(TensorType t);
// Traits with the dot kernels of a given ISA (tests, benchmarks); UsageError if the type or
// the ISA is unsupported here.
const TypeTraits& traits_for_isa(TensorType t, Isa isa);
bool is_supported(TensorType t);

}  // namespace hearth::quant
