// The row-interleaved (rows16) layouts, per type: repack/unpack round trip, the scalar kernel
// against a double-precision product of the dequantized rows, and every SIMD kernel this CPU
// runs (NEON and SDOT under qemu in `make test-arm`) bitwise equal to the scalar kernel, for
// 1..4 tokens, on random bytes (every quant and scale bit pattern a file may hold).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "hearth/quant/rows16_kernels.h"
#include "quant/quant_test_util.h"

namespace hearth::quant {
namespace {

using T = TensorType;

std::vector<T> rows16_types() {
  std::vector<T> out;
  for (T t : {T::kQ8_0, T::kQ4_0, T::kQ4_K, T::kQ5_K, T::kQ6_K}) {
    if (traits_for_isa(t, Isa::kScalar).rows16 != nullptr) out.push_back(t);
  }
  return out;
}

// 16 GGUF rows of random blocks and `n_tokens` activation rows, each prepared.
struct Group {
  int64_t cols;
  size_t row_bytes;
  std::vector<uint8_t> rows;      // (16, cols) in the type, GGUF rows
  std::vector<uint8_t> group;     // the same repacked
  std::vector<uint8_t> acts;      // (n_tokens, cols) in vec_dot_type
  std::vector<uint8_t> prepared;  // (n_tokens, act_bytes) prepared
  size_t act_row_bytes, prepared_bytes;
};

Group make_group(T type, int64_t cols, int n_tokens, uint32_t seed) {
  const Rows16& r16 = *traits_for_isa(type, Isa::kScalar).rows16;
  Group g;
  g.cols = cols;
  g.row_bytes = testing::row_bytes(type, cols);
  for (int r = 0; r < kRows16; ++r) {
    const auto row = testing::random_blocks(type, cols, seed + static_cast<uint32_t>(r));
    g.rows.insert(g.rows.end(), row.begin(), row.end());
  }
  g.group.resize(r16.group_bytes(cols));
  r16.repack(cols, g.rows.data(), g.row_bytes, g.group.data());
  const T at = traits_for_isa(type, Isa::kScalar).vec_dot_type;
  g.act_row_bytes = testing::row_bytes(at, cols);
  g.prepared_bytes = r16.act_bytes(cols);
  g.acts.resize(g.act_row_bytes * static_cast<size_t>(n_tokens));
  g.prepared.resize(g.prepared_bytes * static_cast<size_t>(n_tokens));
  for (int t = 0; t < n_tokens; ++t) {
    const auto x =
        testing::gaussian(static_cast<size_t>(cols), seed + 100 + static_cast<uint32_t>(t));
    traits_for_isa(at, Isa::kScalar).quantize(x.data(), g.acts.data() + t * g.act_row_bytes, cols);
    r16.prepare_act(cols, g.acts.data() + t * g.act_row_bytes,
                    g.prepared.data() + t * g.prepared_bytes);
  }
  return g;
}

class Rows16Kernels : public ::testing::TestWithParam<T> {};

TEST_P(Rows16Kernels, RepackThenUnpackGivesTheRowsBack) {
  const Rows16& r16 = *traits_for_isa(GetParam(), Isa::kScalar).rows16;
  for (int64_t cols : {256, 768}) {
    const Group g = make_group(GetParam(), cols, 1, 1);
    std::vector<uint8_t> back(g.rows.size());
    r16.unpack(cols, g.group.data(), back.data(), g.row_bytes);
    EXPECT_EQ(back, g.rows) << "cols " << cols;
  }
}

// Both sides sum exact per-block integers times rounded scales; only the float accumulation
// differs. For Q4_K the kernel adds d * S1 and -dmin * S2 separately, and those two terms can
// be much larger than their difference |w_i| a_i, so the bound is relative to
// S = sum |w_i a_i| with room for the min terms: 1e-4 * S, still far below any indexing
// mistake (a wrong row or block moves the result by O(S)).
TEST_P(Rows16Kernels, ScalarKernelMatchesTheDequantizedProduct) {
  const T type = GetParam();
  const Rows16& r16 = *traits_for_isa(type, Isa::kScalar).rows16;
  const T at = traits_for_isa(type, Isa::kScalar).vec_dot_type;
  const int64_t cols = 512;
  const Group g = make_group(type, cols, 1, 7);
  float out[kRows16];
  r16.dot(cols, g.group.data(), g.prepared.data(), g.prepared_bytes, 1, out, 0);
  const auto a = testing::dequantize(at, g.acts.data(), cols);
  for (int r = 0; r < kRows16; ++r) {
    const auto w = testing::dequantize(type, g.rows.data() + r * g.row_bytes, cols);
    double want = 0, mag = 0;
    for (int64_t c = 0; c < cols; ++c) {
      want += static_cast<double>(w[c]) * a[c];
      mag += std::fabs(static_cast<double>(w[c]) * a[c]);
    }
    EXPECT_NEAR(out[r], want, 1e-4 * mag + 1e-5) << "row " << r;
  }
}

TEST_P(Rows16Kernels, EveryIsaAndTokenCountGivesTheScalarBits) {
  const T type = GetParam();
  const Rows16& scalar = *traits_for_isa(type, Isa::kScalar).rows16;
  for (int64_t cols : {256, 1024}) {
    const Group g = make_group(type, cols, 4, 11);
    std::vector<float> want(4 * kRows16);
    for (int t = 0; t < 4; ++t) {
      scalar.dot(cols, g.group.data(), g.prepared.data() + t * g.prepared_bytes, g.prepared_bytes,
                 1, want.data() + t * kRows16, 0);
    }
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon, Isa::kNeonDotprod}) {
      if (!isa_supported(isa)) continue;
      const TypeTraits& tr = traits_for_isa(type, isa);
      ASSERT_NE(tr.rows16, nullptr);
      for (int n = 1; n <= 4; ++n) {
        std::vector<float> got(static_cast<size_t>(n) * kRows16);
        tr.rows16->dot(cols, g.group.data(), g.prepared.data(), g.prepared_bytes, n, got.data(),
                       kRows16);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
            << isa_name(isa) << (tr.rows16_fast ? " (simd)" : " (scalar)") << ", " << n
            << " tokens, cols " << cols;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Rows16Kernels, ::testing::ValuesIn(rows16_types()),
                         [](const auto& info) {
                           return std::string(gguf::tensor_type_name(info.param));
                         });

}  // namespace
}  // namespace hearth::quant
