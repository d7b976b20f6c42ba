// Every dot kernel of every ISA this CPU runs against the scalar reference, and the scalar
// reference against a double-precision dot of the dequantized rows.
//
// Tolerance: both sides compute each block's integer sum exactly; they differ only in how
// the per-block float terms (each with <= 3 rounded factors) are summed. Any summation
// order of k terms errs by at most (k - 1) * 2^-24 * S, S = sum of |terms|, so we allow
//   tol = (blocks + 32) * 2^-23 * S,   S = sum_i (|w_i| + off_i) * |a_i|
// where off_i = dmin * m of the element's sub-block for Q4_K/Q5_K (those kernels sum the
// d*scale*q part and the min part separately, and |d*scale*q| <= |w| + off). Float types
// use blocks = n / 8 (each SIMD lane sums n / lanes products before the final reduction).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "quant/quant_test_util.h"

namespace hearth::quant {
namespace {

using T = TensorType;

// Per-element min offset dmin * m (0 for types without mins).
std::vector<double> min_offsets(T type, const uint8_t* w, int64_t n) {
  std::vector<double> off(static_cast<size_t>(n), 0.0);
  if (type != T::kQ4_K && type != T::kQ5_K) return off;
  const size_t bb = gguf::tensor_type_info(type).block_bytes;
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* blk = w + i * bb;
    uint16_t dmin_h;
    std::memcpy(&dmin_h, blk + 2, 2);
    uint8_t sc[8], m[8];
    unpack_q4k_scales(blk + 4, sc, m);
    for (int e = 0; e < 256; ++e) off[i * 256 + e] = half_to_float(dmin_h) * m[e / 32];
  }
  return off;
}

struct DotData {
  std::vector<uint8_t> w;    // (n) in the weight type
  std::vector<uint8_t> act;  // (n) in vec_dot_type
  double scale_sum = 0;      // S of the tolerance formula
  double tol = 0;
};

DotData make_data(T type, int64_t n, uint32_t seed, bool random_bytes) {
  DotData d;
  const auto& tr = traits_for_isa(type, Isa::kScalar);
  if (random_bytes) {
    d.w = testing::random_blocks(type, n, seed);
  } else {
    const auto xw = testing::gaussian(static_cast<size_t>(n), seed);
    d.w.resize(testing::row_bytes(type, n));
    tr.quantize(xw.data(), d.w.data(), n);
  }
  const auto xa = testing::gaussian(static_cast<size_t>(n), seed + 1);
  const auto& at = traits_for_isa(tr.vec_dot_type, Isa::kScalar);
  d.act.resize(testing::row_bytes(tr.vec_dot_type, n));
  at.quantize(xa.data(), d.act.data(), n);
  const auto wf = testing::dequantize(type, d.w.data(), n);
  const auto af = testing::dequantize(tr.vec_dot_type, d.act.data(), n);
  const auto off = min_offsets(type, d.w.data(), n);
  for (int64_t i = 0; i < n; ++i) d.scale_sum += (std::fabs(wf[i]) + off[i]) * std::fabs(af[i]);
  const uint32_t be = gguf::tensor_type_info(type).block_elems;
  const double blocks = be == 1 ? static_cast<double>(n) / 8 : static_cast<double>(n / be);
  d.tol = (blocks + 32) * std::ldexp(1.0, -23) * d.scale_sum;
  return d;
}

const T kWeightTypes[] = {T::kF32,  T::kF16,  T::kBF16, T::kQ8_0,
                          T::kQ4_0, T::kQ4_K, T::kQ5_K, T::kQ6_K};
const Isa kSimdIsas[] = {Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDotprod};

// Lengths per type: several blocks, odd block counts (loop tails), and a model-sized row.
std::vector<int64_t> lengths(T type) {
  const uint32_t be = gguf::tensor_type_info(type).block_elems;
  if (be == 1) return {7, 64, 1000, 4096};
  if (be == 32) return {32, 96, 160, 544, 4096, 14336};  // 544: a Q8_0 group + 1 block
  // 1536: six super-blocks, a group of four and two more (the prepared Q4_K/Q5_K kernels)
  return {256, 768, 1536, 4096, 14336};
}

TEST(ReferenceDot, MatchesDequantizedDot) {
  for (T type : kWeightTypes) {
    for (int64_t n : lengths(type)) {
      for (bool random_bytes : {false, true}) {
        const auto d = make_data(type, n, static_cast<uint32_t>(n * 31 + 7), random_bytes);
        const auto& tr = traits_for_isa(type, Isa::kScalar);
        const auto wf = testing::dequantize(type, d.w.data(), n);
        const auto af = testing::dequantize(tr.vec_dot_type, d.act.data(), n);
        double expect = 0;
        for (int64_t i = 0; i < n; ++i) expect += static_cast<double>(wf[i]) * af[i];
        float got = 0;
        tr.vec_dot(n, d.w.data(), d.act.data(), &got);
        EXPECT_NEAR(got, expect, d.tol)
            << gguf::tensor_type_name(type) << " n=" << n << " random_bytes=" << random_bytes;
      }
    }
  }
}

class SimdDot : public ::testing::TestWithParam<std::tuple<Isa, T>> {};

TEST_P(SimdDot, MatchesScalarReference) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) {
    GTEST_SKIP() << "CPU lacks " << isa_name(isa) << ": its kernels are not tested here";
  }
  const auto& ref = traits_for_isa(type, Isa::kScalar);
  const auto& simd = traits_for_isa(type, isa);
  ASSERT_NE(simd.vec_dot, nullptr);
  EXPECT_NE(simd.vec_dot, ref.vec_dot)
      << "no " << isa_name(isa) << " kernel for " << gguf::tensor_type_name(type);
  for (int64_t n : lengths(type)) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const bool random_bytes = seed % 2 == 0;
      const auto d = make_data(type, n, seed * 1000 + static_cast<uint32_t>(n), random_bytes);
      float want = 0, got = 0;
      ref.vec_dot(n, d.w.data(), d.act.data(), &want);
      simd.vec_dot(n, d.w.data(), d.act.data(), &got);
      ASSERT_NEAR(got, want, d.tol)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " seed=" << seed;
    }
  }
}

// The four-token kernels (prefill) against the reference, token by token.
TEST_P(SimdDot, FourTokenKernelMatchesReference) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& simd = traits_for_isa(type, isa);
  if (simd.vec_dot_x4 == nullptr) GTEST_SKIP() << "no four-token kernel";
  const auto& ref = traits_for_isa(type, Isa::kScalar);
  for (int64_t n : lengths(type)) {
    DotData d[4];
    for (uint32_t t = 0; t < 4; ++t) d[t] = make_data(type, n, 77 + t, t % 2 == 1);
    // Weights of token 0's data, four different activation rows laid out at a stride.
    const size_t stride = d[0].act.size() + 64;
    std::vector<uint8_t> acts(4 * stride);
    for (int t = 0; t < 4; ++t)
      std::memcpy(acts.data() + t * stride, d[t].act.data(), d[t].act.size());
    float got[4];
    simd.vec_dot_x4(n, d[0].w.data(), acts.data(), stride, got);
    for (int t = 0; t < 4; ++t) {
      float want = 0;
      ref.vec_dot(n, d[0].w.data(), d[t].act.data(), &want);
      EXPECT_NEAR(got[t], want, 4 * std::max(d[0].tol, d[t].tol))
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " token " << t;
    }
  }
}

// The packed prefill kernels: against the reference (same tolerance as the one-token
// kernel: they form the same integer sums) and bitwise against this ISA's vec_dot, which
// matmul's contract with matvec requires.
TEST_P(SimdDot, PackedKernelMatchesReferenceAndVecDotBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& simd = traits_for_isa(type, isa);
  if (simd.packed == nullptr) GTEST_SKIP() << "no packed kernel";
  const auto& pk = *simd.packed;
  const auto& ref = traits_for_isa(type, Isa::kScalar);
  for (int64_t n : lengths(type)) {
    DotData d[4];
    for (uint32_t t = 0; t < 4; ++t) d[t] = make_data(type, n, 300 + t, t % 2 == 1);
    std::vector<uint8_t> pw(pk.w_row_bytes(n));  // packed weight row
    pk.pack_w(n, d[0].w.data(), pw.data());
    const size_t stride = pk.a_row_bytes(n) + 64;
    std::vector<uint8_t> pa(4 * stride);  // (4, stride) packed activation rows
    for (int t = 0; t < 4; ++t) pk.pack_a(n, d[t].act.data(), pa.data() + t * stride);
    float got[4];
    pk.dot_x4(n, pw.data(), pa.data(), stride, got);
    for (int t = 0; t < 4; ++t) {
      float want = 0, one = 0;
      ref.vec_dot(n, d[0].w.data(), d[t].act.data(), &want);
      simd.vec_dot(n, d[0].w.data(), d[t].act.data(), &one);
      EXPECT_NEAR(got[t], want, 4 * std::max(d[0].tol, d[t].tol))
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " token " << t;
      EXPECT_EQ(std::memcmp(&got[t], &one, sizeof(float)), 0)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " token " << t
          << ": packed " << got[t] << ", vec_dot " << one;
    }
  }
}

// The prepared-activation decode kernels: bitwise equal to this ISA's vec_dot on the plain
// activation row (matvec switches to them transparently).
TEST_P(SimdDot, PreparedKernelMatchesVecDotBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& simd = traits_for_isa(type, isa);
  if (simd.prepared == nullptr) GTEST_SKIP() << "no prepared kernel";
  for (int64_t n : lengths(type)) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const auto d = make_data(type, n, 500 + seed, seed % 2 == 0);
      std::vector<uint8_t> prepared(simd.prepared->bytes(n));
      simd.prepared->prepare(n, d.act.data(), prepared.data());
      float want = 0, got = 0;
      simd.vec_dot(n, d.w.data(), d.act.data(), &want);
      simd.prepared->dot(n, d.w.data(), prepared.data(), &got);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << ": prepared "
          << got << ", vec_dot " << want;
    }
    if (simd.prepared->dot_x4 == nullptr) continue;
    // Four prepared activation rows (stride past the row, as matmul lays them out), one weight row.
    DotData d[4];
    for (uint32_t t = 0; t < 4; ++t) d[t] = make_data(type, n, 600 + t, t % 2 == 1);
    const size_t stride = simd.prepared->bytes(n) + 64;
    std::vector<uint8_t> prepared(4 * stride);
    for (int t = 0; t < 4; ++t)
      simd.prepared->prepare(n, d[t].act.data(), prepared.data() + t * stride);
    float got[4];
    simd.prepared->dot_x4(n, d[0].w.data(), prepared.data(), stride, got);
    for (int t = 0; t < 4; ++t) {
      float want = 0;
      simd.vec_dot(n, d[0].w.data(), d[t].act.data(), &want);
      EXPECT_EQ(std::memcmp(&got[t], &want, sizeof(float)), 0)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " token " << t
          << ": prepared x4 " << got[t] << ", vec_dot " << want;
    }
  }
}

// Four weight rows a call (PreparedDot::dot_rows4 on a prepared activation, or
// TypeTraits::vec_dot_rows4 on a plain one; matvec takes rows four at a time with them): each
// row's bits are vec_dot's, at every length (partial groups included), with rows at a stride
// past their length.
TEST_P(SimdDot, Rows4KernelsMatchVecDotBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& simd = traits_for_isa(type, isa);
  const bool prepared = simd.prepared != nullptr && simd.prepared->dot_rows4 != nullptr;
  if (!prepared && simd.vec_dot_rows4 == nullptr) GTEST_SKIP() << "no four-row kernel";
  for (int64_t n : lengths(type)) {
    DotData d[4];
    for (uint32_t r = 0; r < 4; ++r) d[r] = make_data(type, n, 800 + r, r % 2 == 1);
    const size_t stride = d[0].w.size() + 96;
    std::vector<uint8_t> rows(4 * stride, 0xa5);
    for (size_t r = 0; r < 4; ++r) {
      std::memcpy(rows.data() + r * stride, d[r].w.data(), d[r].w.size());
    }
    float got[4];
    if (prepared) {
      std::vector<uint8_t> act(simd.prepared->bytes(n));
      simd.prepared->prepare(n, d[0].act.data(), act.data());
      simd.prepared->dot_rows4(n, rows.data(), stride, act.data(), got);
    } else {
      simd.vec_dot_rows4(n, rows.data(), stride, d[0].act.data(), got);
    }
    for (int r = 0; r < 4; ++r) {
      float want = 0;
      simd.vec_dot(n, d[r].w.data(), d[0].act.data(), &want);
      EXPECT_EQ(std::memcmp(&got[r], &want, sizeof(float)), 0)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << " row " << r
          << ": four rows " << got[r] << ", vec_dot " << want;
    }
  }
}

// The long-row decode kernels (vec_dot_long, PreparedDot::dot_long) prefetch ahead and
// otherwise run vec_dot's arithmetic: bitwise equal to it, at every length (matvec picks them
// by row length alone).
TEST_P(SimdDot, LongRowKernelsMatchVecDotBits) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& simd = traits_for_isa(type, isa);
  const bool prepared_long = simd.prepared != nullptr && simd.prepared->dot_long != nullptr;
  if (simd.vec_dot_long == nullptr && !prepared_long) GTEST_SKIP() << "no long-row kernel";
  for (int64_t n : lengths(type)) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      const auto d = make_data(type, n, 700 + seed, seed % 2 == 0);
      float want = 0, got = 0;
      simd.vec_dot(n, d.w.data(), d.act.data(), &want);
      if (prepared_long) {
        std::vector<uint8_t> prepared(simd.prepared->bytes(n));
        simd.prepared->prepare(n, d.act.data(), prepared.data());
        simd.prepared->dot_long(n, d.w.data(), prepared.data(), &got);
      } else {
        simd.vec_dot_long(n, d.w.data(), d.act.data(), &got);
      }
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
          << isa_name(isa) << " " << gguf::tensor_type_name(type) << " n=" << n << ": long " << got
          << ", vec_dot " << want;
    }
  }
}

// Extreme values: every quant at its largest magnitude and activations at +-127 exercise
// the 16-bit intermediate sums of the SIMD kernels (saturation would show here).
TEST_P(SimdDot, ExtremeQuantsDoNotSaturate) {
  const auto [isa, type] = GetParam();
  if (!isa_supported(isa)) GTEST_SKIP() << "CPU lacks " << isa_name(isa);
  const auto& ref = traits_for_isa(type, Isa::kScalar);
  if (gguf::tensor_type_info(type).block_elems == 1) GTEST_SKIP() << "float type";
  constexpr int64_t n = 1024;
  auto w = testing::random_blocks(type, n, 99);
  // Saturate every quant byte (keeping the fp16 scales random and finite).
  const size_t bb = gguf::tensor_type_info(type).block_bytes;
  for (size_t b = 0; b < w.size() / bb; ++b) {
    uint8_t* blk = w.data() + b * bb;
    switch (type) {
      case T::kQ8_0:
        std::memset(blk + 2, 0x80, 32);
        break;  // -128
      case T::kQ4_0:
        std::memset(blk + 2, 0xff, 16);
        break;  // 15 -> +7
      case T::kQ4_K:
        std::memset(blk + 4, 0xff, 140);
        break;  // scales, mins, quants 63/15
      case T::kQ5_K:
        std::memset(blk + 4, 0xff, 172);
        break;
      case T::kQ6_K:
        std::memset(blk, 0xff, 192);
        std::memset(blk + 192, 0x80, 16);
        break;
      default:
        break;
    }
  }
  std::vector<float> xa(n);
  for (int64_t i = 0; i < n; ++i) xa[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  const auto& at = traits_for_isa(ref.vec_dot_type, Isa::kScalar);
  std::vector<uint8_t> act(testing::row_bytes(ref.vec_dot_type, n));
  at.quantize(xa.data(), act.data(), n);
  float want = 0, got = 0;
  ref.vec_dot(n, w.data(), act.data(), &want);
  const auto& simd = traits_for_isa(type, isa);
  simd.vec_dot(n, w.data(), act.data(), &got);
  EXPECT_NEAR(got, want, 1e-5 * std::fabs(want) + 1e-6)
      << isa_name(isa) << " " << gguf::tensor_type_name(type);
  if (simd.prepared != nullptr) {
    std::vector<uint8_t> prepared(simd.prepared->bytes(n));
    simd.prepared->prepare(n, act.data(), prepared.data());
    float prepared_got = 0;
    simd.prepared->dot(n, w.data(), prepared.data(), &prepared_got);
    EXPECT_EQ(std::memcmp(&prepared_got, &got, sizeof(float)), 0)
        << isa_name(isa) << " " << gguf::tensor_type_name(type) << ": prepared " << prepared_got
        << ", vec_dot " << got;
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, SimdDot,
                         ::testing::Combine(::testing::ValuesIn(kSimdIsas),
                                            ::testing::ValuesIn(kWeightTypes)),
                         [](const auto& info) {
                           return std::string(isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(gguf::tensor_type_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace hearth::quant
