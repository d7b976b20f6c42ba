// Transformer operators other than the weight matmuls, and the CPU-ISA choice they share.
//
// Ops (all f32 activations, row-major, caller-owned buffers; headers in this folder):
//   norm.h       rmsnorm(x, weight, out)        x, out: (n_rows, dim)   weight: (dim)
//   rope.h       RopeTable + rope(x, table, t)  x: (n_heads, head_dim) for one token;
//                                               "normal" pairs (2i, 2i+1), "neox" (i, i+n_rot/2)
//   softmax.h    softmax(x)                     x: (n_rows, n) in place, max-subtracted
//   activation.h silu_mul(gate, up, out), add(a, b, out), add_scaled(y, x, s)   (n) each
//   kv_cache.h   KvCache: per layer K and V as f16, layout (n_kv_heads, n_ctx, head_dim)
//   attention.h  attention(q, kv, out, pos0, n_tokens, [h_begin, h_end))
//                q, out: (n_tokens, n_heads, head_dim); causal over cache positions
//
// Every op has a plain scalar reference in namespace hearth::compute::ref (also the path
// taken when the ISA is kScalar, except attention, whose kScalar path is a portable float
// kernel, the reference being double and slow) and AVX2 / AVX-512 variants in *_avx2.cpp /
// *_avx512.cpp, written once as templates over a vector type in *_simd.h and instantiated per ISA
// file. Each public op takes a trailing `Isa` that defaults to active_isa(); tests pass each ISA
// the machine supports explicitly.
//
// Threading contract: no op starts threads, allocates on the hot path (RopeTable::compute
// sizes its table once per batch shape) or holds global mutable state. Ops are safe to call
// concurrently on disjoint outputs. The caller's thread pool splits:
//   - row ops (rmsnorm, softmax) by rows, elementwise ops by ranges of elements,
//   - rope by tokens (or heads: call it on a sub-block of heads),
//   - attention by query-head ranges [h_begin, h_end): attention_split() gives part i of
//     n a range aligned to GQA groups, so each K/V head is streamed by one thread only.
//   The KvCache is written by store() before attention reads it; the caller orders the
//   two (a barrier between the K/V projection and attention), as for any other op.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include "hearth/base/error.h"

namespace hearth::compute {

enum class Isa { kScalar, kAvx2, kAvx512 };

inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512};

inline std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

// True when this build has the variant and the CPU runs it (AVX2 also needs FMA and F16C;
// AVX-512 needs F, BW, VL and DQ since the compiler may use any of them in those files).
inline bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
#if defined(__x86_64__)
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::kAvx512:
      return isa_supported(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
#else
    case Isa::kAvx2:
    case Isa::kAvx512:
      return false;
#endif
  }
  return false;
}

namespace detail {
inline Isa choose_isa() {
  const char* forced = std::getenv("HEARTH_ISA");
  if (forced == nullptr || *forced == '\0') {
    if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
    if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
    return Isa::kScalar;
  }
#if defined(__aarch64__)
  // The quant kernels have NEON variants (hearth::quant::Isa); these ops do not yet, so
  // forcing either NEON level runs them scalar.
  if (std::string_view(forced) == "neon" || std::string_view(forced) == "dotprod") {
    return Isa::kScalar;
  }
#endif
  for (Isa isa : kAllIsas) {
    if (isa_name(isa) != forced) continue;
    if (!isa_supported(isa)) {
      throw UsageError(std::string("HEARTH_ISA=") + forced + ": this CPU or build cannot run it");
    }
    return isa;
  }
  throw UsageError(
      std::string("HEARTH_ISA=") + forced +
      ": unknown ISA for this build (expected scalar, avx2 or avx512; neon or dotprod on ARM)");
}
}  // namespace detail

// The best supported ISA, or the one forced by env HEARTH_ISA=scalar|avx2|avx512 (read
// once). Throws UsageError when HEARTH_ISA names an unknown or unsupported ISA.
inline Isa active_isa() {
  static const Isa isa = detail::choose_isa();
  return isa;
}

}  // namespace hearth::compute
