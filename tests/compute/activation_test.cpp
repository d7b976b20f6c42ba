// silu*mul, add, scaled add: every ISA against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "hearth/compute/activation.h"

namespace hearth::compute {
namespace {

class ActivationTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not on this CPU";
  }
};

std::vector<float> random_vector(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

constexpr int64_t kSizes[] = {1, 5, 8, 15, 16, 31, 100, 4099};

// Tolerance 2e-6 relative: silu(g) * u = g * u / (1 + e^-g); the vector exp is within 2e-7
// relative, which moves 1 + e^-g by at most that, and the multiply and divide add ~1.2e-7
// each, while the reference rounds differently (divide then multiply): < 6e-7 in all.
// Absolute 1e-30 covers g far below -88 where the vector exp saturates at e^88 and returns
// ~-1e-36 instead of the reference's -0.
TEST_P(ActivationTest, SiluMulMatchesReference) {
  for (int64_t n : kSizes) {
    auto gate = random_vector(n, -20.0f, 20.0f, 3 + n);
    const auto up = random_vector(n, -2.0f, 2.0f, 4 + n);
    if (n > 8) {
      gate[0] = -100.0f;  // exp(100) overflows float
      gate[1] = 100.0f;
      gate[2] = 0.0f;
      gate[3] = -87.5f;
    }
    std::vector<float> expect(n), got(n);
    ref::silu_mul(gate.data(), up.data(), expect.data(), n);
    silu_mul(gate.data(), up.data(), got.data(), n, GetParam());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], expect[i], 2e-6f * std::fabs(expect[i]) + 1e-30f)
          << "n " << n << " gate " << gate[i];
    }
    // In place over gate.
    silu_mul(gate.data(), up.data(), gate.data(), n, GetParam());
    EXPECT_EQ(std::memcmp(gate.data(), got.data(), n * sizeof(float)), 0);
  }
}

TEST_P(ActivationTest, SiluKnownValues) {
  const std::vector<float> gate = {0.0f, 1.0f, -1.0f, 5.0f};
  const std::vector<float> up = {3.0f, 1.0f, 1.0f, 2.0f};
  std::vector<float> out(4);
  silu_mul(gate.data(), up.data(), out.data(), 4, GetParam());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(out[2], -1.0 / (1.0 + std::exp(1.0)), 1e-6);
  EXPECT_NEAR(out[3], 2.0 * 5.0 / (1.0 + std::exp(-5.0)), 1e-5);
}

// add is one rounding in every path: bit-exact.
TEST_P(ActivationTest, AddIsExact) {
  for (int64_t n : kSizes) {
    const auto a = random_vector(n, -5.0f, 5.0f, 5 + n);
    const auto b = random_vector(n, -5.0f, 5.0f, 6 + n);
    std::vector<float> expect(n), got(n);
    ref::add(a.data(), b.data(), expect.data(), n);
    add(a.data(), b.data(), got.data(), n, GetParam());
    ASSERT_EQ(std::memcmp(expect.data(), got.data(), n * sizeof(float)), 0) << "n " << n;
  }
}

// add_scaled: the SIMD paths fuse s * x + y (one rounding), the reference may round twice:
// within 2^-23 of (|s x| + |y|).
TEST_P(ActivationTest, AddScaledMatchesReference) {
  for (int64_t n : kSizes) {
    const auto x = random_vector(n, -5.0f, 5.0f, 7 + n);
    const auto y0 = random_vector(n, -5.0f, 5.0f, 8 + n);
    auto expect = y0, got = y0;
    const float s = 0.37f;
    ref::add_scaled(expect.data(), x.data(), s, n);
    add_scaled(got.data(), x.data(), s, n, GetParam());
    for (int64_t i = 0; i < n; ++i) {
      const float bound = std::ldexp(std::fabs(s * x[i]) + std::fabs(y0[i]), -23);
      ASSERT_NEAR(got[i], expect[i], bound) << "n " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, ActivationTest, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace hearth::compute
