// softmax: every ISA against the scalar reference and against its defining properties.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hearth/compute/softmax.h"

namespace hearth::compute {
namespace {

class SoftmaxTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not on this CPU";
  }
};

// Tolerance 1e-5 relative: the vector exp is within 2e-7 relative of std::exp, and the float
// sum gives each lane at most n / kLanes = 250 positive terms (worst case 1.5e-5, typically
// ~1e-6 relative), against a reference that sums in double.
TEST_P(SoftmaxTest, MatchesReference) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 3, 8, 17, 64, 255, 2000}) {
    for (float spread : {1.0f, 30.0f, 1000.0f}) {
      std::uniform_real_distribution<float> dist(-spread, spread);
      const int64_t rows = 2;
      std::vector<float> x(rows * n);  // (rows, n)
      for (auto& v : x) v = dist(rng);
      auto expect = x;
      ref::softmax(expect.data(), rows, n);
      softmax(x.data(), rows, n, GetParam());
      for (int64_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float e = expect[r * n + i];
          ASSERT_NEAR(x[r * n + i], e, 1e-5f * e + 1e-12f) << "n " << n << " spread " << spread;
          sum += x[r * n + i];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST_P(SoftmaxTest, MaskedEntriesBecomeZero) {
  std::vector<float> x = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f, -INFINITY, 3.0f, 1.0f, -INFINITY};
  softmax(x.data(), 1, static_cast<int64_t>(x.size()), GetParam());
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(0.5) + std::exp(3.0) + std::exp(1.0);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_EQ(x[5], 0.0f);
  EXPECT_EQ(x[8], 0.0f);
  EXPECT_NEAR(x[6], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(x[0], std::exp(1.0) / z, 1e-6);
}

TEST_P(SoftmaxTest, ShiftInvariantForHugeInputs) {
  // Without max subtraction exp(1e4) overflows; softmax(x + c) must equal softmax(x).
  std::vector<float> a = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f, 10.0f};
  std::vector<float> b = a;
  for (auto& v : b) v += 10000.0f;
  softmax(a.data(), 1, 10, GetParam());
  softmax(b.data(), 1, 10, GetParam());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    EXPECT_NEAR(a[i], b[i], 1e-6f);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SoftmaxTest, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

}  // namespace
}  // namespace hearth::compute
