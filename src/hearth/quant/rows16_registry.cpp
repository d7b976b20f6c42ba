// Which weight types have a row-interleaved (rows16) layout, and on which ISAs it has SIMD
// kernels: one row per type. Each type's layout and scalar reference live in rows16_<type>.cpp,
// its SIMD dot kernels in rows16_<type>_<isa>.cpp; an ISA without kernels for a type is
// nullptr.
#include "hearth/quant/isa_kernels.h"
#include "hearth/quant/rows16_kernels.h"

#include <array>
#include <iterator>
#include <optional>

namespace hearth::quant {
namespace {

struct Rows16Row {
  gguf::TensorType type;
  const Rows16* scalar;
  // Where each ISA's kernel pointer is (the kernel files export them), indexed by Isa; kScalar's
  // slot unused.
  Rows16DotKernel* const* simd[5];
  // The same for Rows16::dot_pair (nullptr: none on that ISA).
  Rows16PairKernel* const* pair[5] = {};
  // The AVX-512 table's dot_pair where amx_enabled() (nullptr: none on AMX).
  Rows16PairKernel* const* amx_pair = nullptr;
  // Rows16::repack per ISA where it has a SIMD one (nullptr: the scalar repack), and the
  // Rows16::repack_min_tokens that goes with it.
  Rows16RepackKernel* const* repack[5] = {};
  int64_t repack_min_tokens = 12;
  bool pair_stream_outputs = false;         // Rows16::stream_outputs with the row's pair kernels
  int amx_call_tokens = kRows16CallTokens;  // Rows16::call_tokens with amx_pair
};

#if defined(__x86_64__)
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0,
     &kRows16Q8_0Scalar,
     {nullptr, &rows16_q8_0_dot_avx2, &rows16_q8_0_dot_avx512, nullptr, nullptr},
     {nullptr, nullptr, &rows16_q8_0_dot_pair_avx512, nullptr, nullptr},
     &rows16_q8_0_dot_pair_amx,
     {nullptr, &rows16_q8_0_repack_avx2, &rows16_q8_0_repack_avx512, nullptr, nullptr},
     2,
     false,
     kRows16MaxCallTokens},  // the tiles' signed lines are copied once per call
    {gguf::TensorType::kQ4_K,
     &kRows16Q4_KScalar,
     {nullptr, &rows16_q4_k_dot_avx2, &rows16_q4_k_dot_avx512, nullptr, nullptr},
     {nullptr, nullptr, &rows16_q4_k_dot_pair_avx512, nullptr, nullptr},
     &rows16_q4_k_dot_pair_amx,
     {nullptr, &rows16_q4_k_repack_avx2, &rows16_q4_k_repack_avx512, nullptr, nullptr},
     2,
     false,
     kRows16MaxCallTokens},
    {gguf::TensorType::kQ6_K,
     &kRows16Q6_KScalar,
     {nullptr, &rows16_q6_k_dot_avx2, &rows16_q6_k_dot_avx512, nullptr, nullptr},
     {nullptr, nullptr, &rows16_q6_k_dot_pair_avx512, nullptr, nullptr},
     &rows16_q6_k_dot_pair_amx,
     {nullptr, &rows16_q6_k_repack_avx2, &rows16_q6_k_repack_avx512, nullptr, nullptr},
     6,  // its four-token GGUF kernel stayed ahead up to 5 tokens
     false,
     kRows16MaxCallTokens},
    {gguf::TensorType::kQ4_0,
     &kRows16Q4_0Scalar,
     {nullptr, &rows16_q4_0_dot_avx2, &rows16_q4_0_dot_avx512, nullptr, nullptr},
     {nullptr, nullptr, &rows16_q4_0_dot_pair_avx512, nullptr, nullptr},
     &rows16_q4_0_dot_pair_amx,
     {nullptr, &rows16_q4_0_repack_avx2, &rows16_q4_0_repack_avx512, nullptr, nullptr},
     2,
     false,
     kRows16MaxCallTokens},
    {gguf::TensorType::kQ5_K,
     &kRows16Q5_KScalar,
     {nullptr, &rows16_q5_k_dot_avx2, &rows16_q5_k_dot_avx512, nullptr, nullptr},
     {nullptr, nullptr, &rows16_q5_k_dot_pair_avx512, nullptr, nullptr},
     &rows16_q5_k_dot_pair_amx,
     {nullptr, &rows16_q5_k_repack_avx2, &rows16_q5_k_repack_avx512, nullptr, nullptr},
     2,
     true,  // its four-token pair kernel spills sums (docs/kernels.md, "Outputs streamed")
     kRows16MaxCallTokens},
};
#elif defined(__aarch64__)
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0,
     &kRows16Q8_0Scalar,
     {nullptr, nullptr, nullptr, &rows16_q8_0_dot_neon, &rows16_q8_0_dot_dotprod}},
    {gguf::TensorType::kQ4_K,
     &kRows16Q4_KScalar,
     {nullptr, nullptr, nullptr, &rows16_q4_k_dot_neon, &rows16_q4_k_dot_dotprod}},
    {gguf::TensorType::kQ6_K,
     &kRows16Q6_KScalar,
     {nullptr, nullptr, nullptr, &rows16_q6_k_dot_neon, &rows16_q6_k_dot_dotprod}},
    {gguf::TensorType::kQ4_0,
     &kRows16Q4_0Scalar,
     {nullptr, nullptr, nullptr, &rows16_q4_0_dot_neon, &rows16_q4_0_dot_dotprod}},
    {gguf::TensorType::kQ5_K,
     &kRows16Q5_KScalar,
     {nullptr, nullptr, nullptr, &rows16_q5_k_dot_neon, &rows16_q5_k_dot_dotprod}},
};
#else
constexpr Rows16Row kRows16Table[] = {
    {gguf::TensorType::kQ8_0, &kRows16Q8_0Scalar, {}},
    {gguf::TensorType::kQ4_K, &kRows16Q4_KScalar, {}},
    {gguf::TensorType::kQ6_K, &kRows16Q6_KScalar, {}},
    {gguf::TensorType::kQ4_0, &kRows16Q4_0Scalar, {}},
    {gguf::TensorType::kQ5_K, &kRows16Q5_KScalar, {}},
};
#endif
constexpr size_t kRows16Types = std::size(kRows16Table);
constexpr size_t kRows16Isas = std::size(kRows16Table[0].simd);

// The SIMD tables: a type's scalar layout functions with an ISA's dot kernel, built on first
// use (the scalar tables live in other files, so they are not constants here).
using Rows16IsaTables = std::array<std::array<Rows16, kRows16Isas>, kRows16Types>;

const Rows16IsaTables& isa_tables() {
  static const Rows16IsaTables tables = [] {
    Rows16IsaTables t{};
    for (size_t r = 0; r < kRows16Types; ++r) {
      for (size_t i = 0; i < kRows16Isas; ++i) {
        t[r][i] = *kRows16Table[r].scalar;
        if (kRows16Table[r].simd[i] != nullptr) t[r][i].dot = *kRows16Table[r].simd[i];
        if (kRows16Table[r].pair[i] != nullptr) {
          t[r][i].dot_pair = *kRows16Table[r].pair[i];
          t[r][i].stream_outputs = kRows16Table[r].pair_stream_outputs;
        }
        if (kRows16Table[r].repack[i] != nullptr) {
          t[r][i].repack = *kRows16Table[r].repack[i];
          t[r][i].repack_min_tokens = kRows16Table[r].repack_min_tokens;
        }
        if (i == static_cast<size_t>(Isa::kAvx512) && kRows16Table[r].amx_pair != nullptr &&
            amx_enabled()) {
          t[r][i].dot_pair = *kRows16Table[r].amx_pair;
          t[r][i].call_tokens = kRows16Table[r].amx_call_tokens;
        }
      }
    }
    return t;
  }();
  return tables;
}

const Rows16Row* find_row(gguf::TensorType type) {
  for (const Rows16Row& row : kRows16Table) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

}  // namespace

const Rows16* scalar_rows16(gguf::TensorType type) {
  const Rows16Row* row = find_row(type);
  return row != nullptr ? row->scalar : nullptr;
}

const Rows16* isa_rows16(gguf::TensorType type, Isa isa) {
  const Rows16Row* row = find_row(type);
  const auto i = static_cast<size_t>(isa);
  if (row == nullptr || isa == Isa::kScalar || i >= kRows16Isas || row->simd[i] == nullptr) {
    return nullptr;
  }
  return &isa_tables()[static_cast<size_t>(row - kRows16Table)][i];
}

const Rows16* rows16_vnni_beside_amx(gguf::TensorType type) {
  // The AVX-512 table with the VNNI pair kernels the AMX ones took the place of, built on first
  // use; a type without an AMX kernel keeps nullptr.
  static const std::array<std::optional<Rows16>, kRows16Types> vnni = [] {
    std::array<std::optional<Rows16>, kRows16Types> t{};
    const auto avx512 = static_cast<size_t>(Isa::kAvx512);
    for (size_t r = 0; r < kRows16Types; ++r) {
      const Rows16Row& row = kRows16Table[r];
      if (!amx_enabled() || row.amx_pair == nullptr || row.pair[avx512] == nullptr) continue;
      Rows16 v = isa_tables()[r][avx512];
      v.dot_pair = *row.pair[avx512];
      v.call_tokens = kRows16CallTokens;
      t[r] = v;
    }
    return t;
  }();
  if (!amx_in_matmul()) return nullptr;
  const Rows16Row* row = find_row(type);
  if (row == nullptr) return nullptr;
  const auto& v = vnni[static_cast<size_t>(row - kRows16Table)];
  return v ? &*v : nullptr;
}

}  // namespace hearth::quant
