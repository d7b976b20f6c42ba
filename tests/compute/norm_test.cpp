// rmsnorm: every ISA against the scalar reference (which sums squares in double).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/compute/norm.h"

namespace hearth::compute {
namespace {

class NormTest : public testing::TestWithParam<Isa> {
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

// Tolerance 1e-5 relative: the float paths sum squares in kLanes-wide accumulators, so each
// lane adds at most dim / kLanes = 640 positive terms; recursive summation of m positive
// terms is within (m - 1) * 2^-24 relative = 3.8e-5 worst case, typically sqrt(m) * 2^-24
// = 1.5e-6; the sqrt halves it and the two scaling multiplies add 1.2e-7.
TEST_P(NormTest, MatchesReferenceOnRandomRows) {
  for (int64_t dim : {1, 7, 16, 33, 100, 4096, 5003}) {
    const int64_t rows = 3;
    const auto x = random_vector(rows * dim, -3.0f, 3.0f, 1 + dim);  // (rows, dim)
    const auto w = random_vector(dim, 0.5f, 1.5f, 2 + dim);          // (dim)
    std::vector<float> expect(rows * dim), got(rows * dim);
    ref::rmsnorm(x.data(), w.data(), expect.data(), rows, dim, 1e-5f);
    rmsnorm(x.data(), w.data(), got.data(), rows, dim, 1e-5f, GetParam());
    for (int64_t i = 0; i < rows * dim; ++i) {
      ASSERT_NEAR(got[i], expect[i], 1e-5f * std::fabs(expect[i]) + 1e-7f)
          << "dim " << dim << " index " << i;
    }
  }
}

TEST_P(NormTest, InPlaceAndUnitRms) {
  const int64_t dim = 256;
  auto x = random_vector(dim, -10.0f, 10.0f, 7);
  const std::vector<float> ones(dim, 1.0f);
  rmsnorm(x.data(), ones.data(), x.data(), 1, dim, 0.0f, GetParam());
  double sum_sq = 0;
  for (float v : x) sum_sq += static_cast<double>(v) * v;
  EXPECT_NEAR(sum_sq / dim, 1.0, 1e-5);  // normalised to unit mean square
}

TEST_P(NormTest, EpsDominatesZeroRow) {
  const int64_t dim = 40;
  const std::vector<float> x(dim, 0.0f), w(dim, 1.0f);
  std::vector<float> out(dim, 5.0f);
  rmsnorm(x.data(), w.data(), out.data(), 1, dim, 1e-6f, GetParam());
  for (float v : out) EXPECT_EQ(v, 0.0f);  // 0 * 1/sqrt(eps), no NaN
}

INSTANTIATE_TEST_SUITE_P(Isas, NormTest, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

// The ISA choice shared by every op (ops.h): HEARTH_ISA forces one, and naming one the CPU
// lacks or an unknown one is a UsageError, not a crash at the first AVX instruction.
TEST(IsaChoice, EnvOverrideAndErrors) {
  const char* saved = std::getenv("HEARTH_ISA");
  const std::string saved_value = saved ? saved : "";
  setenv("HEARTH_ISA", "scalar", 1);
  EXPECT_EQ(detail::choose_isa(), Isa::kScalar);
  for (Isa isa : kAllIsas) {
    setenv("HEARTH_ISA", std::string(isa_name(isa)).c_str(), 1);
    if (isa_supported(isa)) {
      EXPECT_EQ(detail::choose_isa(), isa);
    } else {
      EXPECT_THROW(detail::choose_isa(), UsageError);
    }
  }
  setenv("HEARTH_ISA", "sse9", 1);
  EXPECT_THROW(detail::choose_isa(), UsageError);
  unsetenv("HEARTH_ISA");
  const Isa best = detail::choose_isa();
  EXPECT_TRUE(isa_supported(best));
  for (Isa isa : kAllIsas) {
    if (isa_supported(isa)) {
      EXPECT_GE(static_cast<int>(best), static_cast<int>(isa));
    }
  }
  if (saved) setenv("HEARTH_ISA", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace hearth::compute
