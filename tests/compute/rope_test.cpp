// rope: the table and every ISA against the defining formula evaluated in double.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/compute/rope.h"

namespace hearth::compute {
namespace {

class RopeTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << isa_name(GetParam()) << " not on this CPU";
  }
};

// The formula, independently: x is one head (head_dim) at position pos, in double.
std::vector<double> rope_direct(const std::vector<float>& x, int64_t pos, const RopeConfig& c) {
  const int n_rot = c.n_rot == 0 ? c.head_dim : c.n_rot;
  std::vector<double> out(x.begin(), x.end());
  for (int i = 0; i < n_rot / 2; ++i) {
    double theta = static_cast<double>(pos) * c.freq_scale *
                   std::pow(static_cast<double>(c.base), -2.0 * i / n_rot);
    if (!c.freq_factors.empty()) theta /= c.freq_factors[i];
    const int ia = c.order == RopeOrder::kNormal ? 2 * i : i;
    const int ib = c.order == RopeOrder::kNormal ? 2 * i + 1 : i + n_rot / 2;
    const double a = x[ia], b = x[ib];
    out[ia] = a * std::cos(theta) - b * std::sin(theta);
    out[ib] = a * std::sin(theta) + b * std::cos(theta);
  }
  return out;
}

struct Case {
  int head_dim;
  int n_rot;
  RopeOrder order;
  float base;
  float freq_scale;
  bool factors;
};

// Tolerance 1e-6 absolute for |x| <= 1: cos and sin are rounded to float (2^-24 relative
// each) and a cos - b sin costs two products and a sum in float, so the error is below
// 4 * 2^-24 * (|a| + |b|) = 4.8e-7. Positions up to 2^17 stay exact because the table
// computes angles in double.
TEST_P(RopeTest, MatchesDirectFormula) {
  const Case cases[] = {
      {128, 0, RopeOrder::kNormal, 10000.0f, 1.0f, false},
      {128, 0, RopeOrder::kNeox, 1000000.0f, 1.0f, false},
      {64, 0, RopeOrder::kNormal, 500000.0f, 1.0f, true},  // Llama 3 rope_freqs
      {64, 0, RopeOrder::kNeox, 10000.0f, 0.25f, true},
      {96, 32, RopeOrder::kNeox, 10000.0f, 1.0f, false},  // partial rotary
      {80, 40, RopeOrder::kNormal, 10000.0f, 0.5f, false},
      {6, 0, RopeOrder::kNormal, 10000.0f, 1.0f, false},  // no full vector at all
      {18, 0, RopeOrder::kNeox, 10000.0f, 1.0f, false},
  };
  const std::vector<int64_t> positions = {0, 1, 2, 17, 1000, 4095, 131071};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Case& cs : cases) {
    RopeConfig config;
    config.head_dim = cs.head_dim;
    config.n_rot = cs.n_rot;
    config.base = cs.base;
    config.freq_scale = cs.freq_scale;
    config.order = cs.order;
    const int n_rot = cs.n_rot == 0 ? cs.head_dim : cs.n_rot;
    if (cs.factors) {
      for (int i = 0; i < n_rot / 2; ++i) config.freq_factors.push_back(1.0f + 0.25f * (i % 9));
    }
    RopeTable table(config);
    table.compute(positions);
    const int n_heads = 3;
    const int64_t stride = n_heads * cs.head_dim + 5;  // rows inside a wider (fused) buffer
    const int64_t n_tokens = static_cast<int64_t>(positions.size());
    std::vector<float> x(n_tokens * stride);
    for (auto& v : x) v = dist(rng);
    const auto x0 = x;
    rope(x.data(), 0, n_tokens, n_heads, stride, table, GetParam());
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int h = 0; h < n_heads; ++h) {
        const int64_t off = t * stride + h * cs.head_dim;
        const std::vector<float> head(x0.begin() + off, x0.begin() + off + cs.head_dim);
        const auto expect = rope_direct(head, positions[t], config);
        for (int d = 0; d < cs.head_dim; ++d) {
          ASSERT_NEAR(x[off + d], expect[d], 1e-6)
              << "head_dim " << cs.head_dim << " n_rot " << n_rot << " pos " << positions[t]
              << " dim " << d;
          if (d >= n_rot) {
            ASSERT_EQ(x[off + d], x0[off + d]);  // past n_rot: untouched
          }
        }
      }
      // The padding between token rows is not part of any head: untouched.
      for (int64_t i = n_heads * cs.head_dim; i < stride; ++i) {
        ASSERT_EQ(x[t * stride + i], x0[t * stride + i]);
      }
    }
  }
}

TEST_P(RopeTest, TokenRangeOnlyTouchesThoseTokens) {
  RopeConfig config;
  config.head_dim = 32;
  RopeTable table(config);
  table.compute_range(10, 4);
  std::vector<float> x(4 * 32, 0.5f);
  rope(x.data(), 1, 3, 1, 32, table, GetParam());
  for (int d = 0; d < 32; ++d) {
    EXPECT_EQ(x[d], 0.5f);
    EXPECT_EQ(x[3 * 32 + d], 0.5f);
  }
  EXPECT_NE(x[32 + 0], 0.5f);  // position 11 rotates the first pair
  EXPECT_THROW(rope(x.data(), 0, 5, 1, 32, table, GetParam()), UsageError);
}

INSTANTIATE_TEST_SUITE_P(Isas, RopeTest, testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

TEST(RopeTable, RejectsBadConfig) {
  RopeConfig odd;
  odd.head_dim = 64;
  odd.n_rot = 31;
  EXPECT_THROW(RopeTable{odd}, UsageError);
  RopeConfig too_wide;
  too_wide.head_dim = 64;
  too_wide.n_rot = 66;
  EXPECT_THROW(RopeTable{too_wide}, UsageError);
  RopeConfig factors;
  factors.head_dim = 64;
  factors.freq_factors.assign(31, 1.0f);  // needs 32
  EXPECT_THROW(RopeTable{factors}, UsageError);
  factors.freq_factors.assign(32, 1.0f);
  factors.freq_factors[3] = 0.0f;
  EXPECT_THROW(RopeTable{factors}, UsageError);
  RopeConfig base;
  base.head_dim = 64;
  base.base = 0.0f;
  EXPECT_THROW(RopeTable{base}, UsageError);
}

TEST(RopeTable, PositionZeroIsIdentityAndNegativeRejected) {
  RopeConfig config;
  config.head_dim = 16;
  RopeTable table(config);
  table.compute_range(0, 1);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(table.cos(0)[i], 1.0f);
    EXPECT_EQ(table.sin(0)[i], 0.0f);
  }
  const std::vector<int64_t> bad = {3, -1};
  EXPECT_THROW(table.compute(bad), UsageError);
}

}  // namespace
}  // namespace hearth::compute
