// dequantize(quantize(x)) error per type on Gaussian data (sigma 1), as RMSE relative to the
// RMS of x. Each bound is the format's step size over sqrt(12) (uniform rounding error)
// with ~30% headroom for the quantized scales:
//   Q8_0  step ~ amax(32)/127  ~ 2.1/127 -> 0.005  => bound 0.008
//   Q8_K  step ~ amax(256)/127 ~ 2.9/127 -> 0.007  => bound 0.010
//   Q6_K  step ~ amax(16)/32   ~ 1.8/32  -> 0.016  => bound 0.025
//   Q5_K  step ~ range(32)/31  ~ 4.1/31  -> 0.038  => bound 0.055
//   Q4_K  step ~ range(32)/15  ~ 4.1/15  -> 0.079  => bound 0.11
//   Q4_0  step ~ amax(32)/8    ~ 2.1/8   -> 0.076  => bound 0.11
//   F16 (11-bit mantissa) 2^-12 relative => 5e-4; BF16 (8-bit) 2^-9 => 4e-3.
#include <gtest/gtest.h>

#include <cmath>

#include "hearth/quant/rounding.h"
#include "quant/quant_test_util.h"

namespace hearth::quant {
namespace {

using T = TensorType;

struct RoundTripCase {
  T type;
  double max_rel_rmse;
};

class RoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(RoundTrip, ErrorWithinFormatBound) {
  const auto [type, bound] = GetParam();
  constexpr int64_t n = 256 * 64;
  const auto x = testing::gaussian(n, 1234);
  const auto& tr = traits_for_isa(type, Isa::kScalar);
  std::vector<uint8_t> q(testing::row_bytes(type, n));
  tr.quantize(x.data(), q.data(), n);
  std::vector<float> y(n);
  tr.to_float(q.data(), y.data(), n);
  double err2 = 0, ref2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << "element " << i;
    err2 += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    ref2 += x[i] * static_cast<double>(x[i]);
  }
  const double rel = std::sqrt(err2 / ref2);
  EXPECT_LT(rel, bound) << gguf::tensor_type_name(type);
  // Quantizing the dequantized values again must reproduce them: the blocks are valid
  // and self-consistent (allowing one step of drift from the re-derived scales).
  std::vector<uint8_t> q2(q.size());
  tr.quantize(y.data(), q2.data(), n);
  std::vector<float> y2(n);
  tr.to_float(q2.data(), y2.data(), n);
  double err2b = 0;
  for (int64_t i = 0; i < n; ++i) err2b += (y[i] - y2[i]) * static_cast<double>(y[i] - y2[i]);
  EXPECT_LT(std::sqrt(err2b / ref2), bound) << gguf::tensor_type_name(type);
}

TEST_P(RoundTrip, ZerosStayZero) {
  const T type = GetParam().type;
  constexpr int64_t n = 512;
  const std::vector<float> x(n, 0.0f);
  const auto& tr = traits_for_isa(type, Isa::kScalar);
  std::vector<uint8_t> q(testing::row_bytes(type, n));
  tr.quantize(x.data(), q.data(), n);
  std::vector<float> y(n, 1.0f);
  tr.to_float(q.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

// The quantizers' rounding equals std::nearbyint (ties to even) over the range they use.
TEST(Rounding, MatchesNearbyint) {
  for (float v = -300.0f; v <= 300.0f; v += 0.125f) {
    ASSERT_EQ(round_to_nearest_even(v), std::nearbyint(v)) << v;
    const float up = std::nextafter(v, 1000.0f);
    ASSERT_EQ(round_to_nearest_even(up), std::nearbyint(up)) << up;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, RoundTrip,
    ::testing::Values(RoundTripCase{T::kQ8_0, 0.008}, RoundTripCase{T::kQ8_K, 0.010},
                      RoundTripCase{T::kQ6_K, 0.025}, RoundTripCase{T::kQ5_K, 0.055},
                      RoundTripCase{T::kQ4_K, 0.11}, RoundTripCase{T::kQ4_0, 0.11},
                      RoundTripCase{T::kF16, 5e-4}, RoundTripCase{T::kBF16, 4e-3},
                      RoundTripCase{T::kF32, 1e-12}),
    [](const auto& info) { return std::string(gguf::tensor_type_name(info.param.type)); });

}  // namespace
}  // namespace hearth::quant
