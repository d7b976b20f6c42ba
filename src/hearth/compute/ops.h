// Transformer operators other than the weight matmuls, and the CPU-ISA choice they share.
//
// Ops (f32 activations, row-major, caller-owned buffers; one header each in this folder):
//   norm.h       rmsnorm(x, weight, out, n_rows, dim, eps)
//                  x, out: (n_rows, dim); weight: (dim); out may alias x
//   rope.h       RopeTable(config).compute(positions), then
//                rope(x, t_begin, t_end, n_heads, token_stride, table)
//                  x: token t at x + t * token_stride, (n_heads, head_dim); in place;
//                  kNormal pairs (2i, 2i+1) (llama), kNeox pairs (i, i + n_rot/2) (qwen2);
//                  freq_scale and Llama 3 rope_freqs factors; angles computed in double
//   softmax.h    softmax(x, n_rows, n)              x: (n_rows, n) in place, max-subtracted
//   activation.h silu_mul(gate, up, out, n)  add(a, b, out, n)  add_scaled(y, x, s, n)
//   kv_cache.h   KvCache(n_layers, n_kv_heads, head_dim, n_ctx): per layer K and V in f16,
//                  (n_kv_heads, n_ctx, head_dim); store(layer, pos, n, k, v), truncate(n)
//   attention.h  attention(shape, kv_view, q, q_stride, out, out_stride, pos0, n_tokens,
//                          h_begin, h_end)
//                  q, out: (n_tokens, n_heads, head_dim); token t at position pos0 + t sees
//                  cache positions [0, pos0 + t]; GQA group = n_heads / n_kv_heads
//
// Every op has a plain scalar reference in namespace hearth::compute::ref, and AVX2 and
// AVX-512 variants written once as templates over a vector type in *_simd.h and compiled per
// ISA in simd_avx2.cpp / simd_avx512.cpp (simd_kernels.inc). Isa::kScalar runs the
// reference, except for attention, where it runs a portable float kernel (the reference
// accumulates in double and is slow; ARM uses this path until NEON variants exist). Each public op
// takes a trailing `Isa` defaulting to active_isa(); tests run every ISA the CPU supports.
//
// Threading contract: no op starts threads, allocates on the hot path (RopeTable::compute
// resizes its table only when the batch grows) or holds global mutable state, so ops are
// safe to call concurrently on disjoint outputs. The caller's thread pool splits:
//   - rmsnorm and softmax by rows, the elementwise ops by element ranges,
//   - rope by tokens [t_begin, t_end) or by heads (x + h0 * head_dim, same token_stride),
//   - attention by query-head ranges [h_begin, h_end): attention_split(shape, n, i) gives
//     part i of n aligned to GQA groups, so each kv head is streamed by one thread only
//     (see attention.h for the ThreadPool::run call).
//   KvCache::store() must finish before attention reads those positions (the barrier
//   between the K/V projections and attention); stores to different layers may overlap.
//
// The ISA enum is this folder's own (the x86 levels these ops have); the choice is not:
// quant::detect_isa() reads the CPU and HEARTH_ISA once for the whole process, and these ops
// run at its level (on ARM, whose NEON levels only the quant kernels have, scalar).
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "hearth/base/error.h"
#include "hearth/quant/type_traits.h"

namespace hearth::compute {

enum class Isa { kScalar, kAvx2, kAvx512 };

inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};

// The quant kernels' level of the same name: AVX2 with FMA, F16C and BMI2; AVX-512 F, BW, VL,
// DQ and VNNI.
inline quant::Isa quant_isa(Isa isa) {
  return isa == Isa::kAvx512 ? quant::Isa::kAvx512
         : isa == Isa::kAvx2 ? quant::Isa::kAvx2
                             : quant::Isa::kScalar;
}

inline std::string_view isa_name(Isa isa) {
  return quant::isa_name(quant_isa(isa));
}

// True when this build has the variant and the CPU runs it.
inline bool isa_supported(Isa isa) {
  return quant::isa_supported(quant_isa(isa));
}

namespace detail {
// The ops' level for the quant kernels' level (quant::detect_isa(): HEARTH_ISA read now).
inline Isa choose_isa() {
  const quant::Isa q = quant::detect_isa();
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2}) {
    if (quant_isa(isa) == q) return isa;
  }
  return Isa::kScalar;
}
}  // namespace detail

// The best supported ISA, or the one forced by env HEARTH_ISA=scalar|avx2|avx512 (read
// once). Throws UsageError when HEARTH_ISA names an unknown or unsupported ISA.
inline Isa active_isa() {
  static const Isa isa = detail::choose_isa();
  return isa;
}

}  // namespace hearth::compute
