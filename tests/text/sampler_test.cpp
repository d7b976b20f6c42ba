#include "hearth/text/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "hearth/base/error.h"

namespace hearth::text {
namespace {

SamplerParams plain(float temp) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

TEST(Sampler, GreedyIsArgmaxWithLowestIndexOnTies) {
  EXPECT_EQ(sample_greedy(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(sample_greedy(std::vector<float>{-5, -5}), 0);
  Sampler s(plain(0.0f));
  EXPECT_EQ(s.sample(std::vector<float>{0, 7, 2, 7}), 1);
  EXPECT_THROW(sample_greedy(std::vector<float>{}), UsageError);
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplerParams p = plain(1.5f);
  p.top_k = 1;
  Sampler s(p);
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) {
    std::vector<float> logits(100);
    for (auto& l : logits) l = static_cast<float>(rng() % 1000) / 100.0f;
    EXPECT_EQ(s.sample(logits), sample_greedy(logits));
  }
}

TEST(Sampler, FrequenciesFollowTheTemperedSoftmax) {
  // logits {0, ln 2, ln 4} -> p = 1/7, 2/7, 4/7 at T = 1; at T = 2, p ~ 1, sqrt2, 2.
  const std::vector<float> logits{0.0f, std::log(2.0f), std::log(4.0f)};
  for (float temp : {1.0f, 2.0f}) {
    Sampler s(plain(temp));
    std::vector<int> counts(3);
    const int n = 30000;
    for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
    std::vector<double> want{1.0, std::pow(2.0, 1.0 / temp), std::pow(4.0, 1.0 / temp)};
    const double sum = want[0] + want[1] + want[2];
    for (int k = 0; k < 3; ++k) {
      // 5 standard deviations of a binomial count.
      const double p = want[k] / sum;
      EXPECT_NEAR(counts[k] / double(n), p, 5 * std::sqrt(p * (1 - p) / n)) << temp << " " << k;
    }
  }
}

TEST(Sampler, DrawFollowsTheDocumentedAlgorithm) {
  // Recompute the draw independently: mt19937_64(seed), u = (r >> 11) * 2^-53, first
  // cumulative probability above u over candidates sorted by logit.
  const std::vector<float> logits{0.5f, 2.0f, -1.0f, 1.0f};
  SamplerParams p = plain(1.0f);
  p.seed = 1234;
  Sampler s(p);
  std::mt19937_64 rng(1234);
  const std::vector<int> order{1, 3, 0, 2};
  double z = 0;
  for (float l : logits) z += std::exp(l - 2.0);
  for (int i = 0; i < 100; ++i) {
    const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    double cum = 0;
    int want = order.back();
    for (int id : order) {
      cum += std::exp(logits[id] - 2.0) / z;
      if (u < cum) {
        want = id;
        break;
      }
    }
    EXPECT_EQ(s.sample(logits), want) << i;
  }
}

TEST(Sampler, SameSeedSameIdsAndResetRestarts) {
  SamplerParams p;  // default chain
  p.seed = 99;
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i)) * 3;
  Sampler a(p), b(p);
  std::vector<int32_t> ida, idb;
  for (int i = 0; i < 64; ++i) {
    ida.push_back(a.sample(logits));
    idb.push_back(b.sample(logits));
  }
  EXPECT_EQ(ida, idb);
  a.reset();
  EXPECT_EQ(a.sample(logits), ida[0]);
  p.seed = 100;
  Sampler c(p);
  std::vector<int32_t> idc;
  for (int i = 0; i < 64; ++i) idc.push_back(c.sample(logits));
  EXPECT_NE(ida, idc);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // p = 0.5, 0.25, 0.125, 0.125: top_p 0.7 keeps ids 0 and 1 only.
  const std::vector<float> logits{std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  SamplerParams p = plain(1.0f);
  p.top_p = 0.7f;
  Sampler s(p);
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(logits)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], seen[1]);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  // p relative to best: 1, 0.5, 0.25. min_p 0.3 keeps ids 0 and 1.
  const std::vector<float> logits{std::log(4.0f), std::log(2.0f), 0.0f};
  SamplerParams p = plain(1.0f);
  p.min_p = 0.3f;
  Sampler s(p);
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[s.sample(logits)];
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_EQ(seen.size(), 2u);
}

TEST(Sampler, PenaltiesOverTheLastNTokens) {
  SamplerParams p = plain(0.0f);  // greedy after penalties
  p.repeat_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s(p);
  const std::vector<float> logits{3.0f, 2.0f, 1.0f};
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(0);  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(s.sample(logits), 1);
  s.accept(1);  // 0 -> 1.5, 1 -> 1.0, 2 -> 1.0
  EXPECT_EQ(s.sample(logits), 0);
  s.accept(2);  // window {1, 2}: 0 is no longer penalised
  EXPECT_EQ(s.sample(logits), 0);
  // Negative logits are multiplied, so they fall further.
  Sampler neg(p);
  neg.accept(0);
  EXPECT_EQ(neg.sample(std::vector<float>{-1.0f, -1.5f}), 1);  // -2 < -1.5

  SamplerParams f = plain(0.0f);
  f.frequency_penalty = 0.4f;
  f.presence_penalty = 0.3f;
  f.penalty_last_n = -1;
  Sampler fs(f);
  for (int i = 0; i < 3; ++i) fs.accept(0);  // 3 - (3 * 0.4 + 0.3) = 1.5 < 2.0
  EXPECT_EQ(fs.sample(std::vector<float>{3.0f, 2.0f}), 1);
  Sampler fs1(f);
  fs1.accept(0);  // 3 - 0.7 = 2.3 > 2.0
  EXPECT_EQ(fs1.sample(std::vector<float>{3.0f, 2.0f}), 0);
}

TEST(Sampler, BadParametersAreUsageErrors) {
  SamplerParams p;
  p.top_p = 0.0f;
  EXPECT_THROW(Sampler{p}, UsageError);
  p = SamplerParams{};
  p.repeat_penalty = 0.0f;
  EXPECT_THROW(Sampler{p}, UsageError);
  p = SamplerParams{};
  p.penalty_last_n = -2;
  EXPECT_THROW(Sampler{p}, UsageError);
  Sampler ok{SamplerParams{}};
  EXPECT_THROW(ok.sample(std::vector<float>{}), UsageError);
}

// Speculative decoding's verdict: greedy accepts exactly the argmax and answers the argmax.
TEST(Sampler, VerifyGreedyAcceptsOnlyTheArgmax) {
  Sampler s(plain(0.0f));
  const std::vector<float> logits{0.5f, 2.0f, 1.0f, 2.0f};
  const auto yes = s.verify(logits, 1);
  EXPECT_TRUE(yes.accepted);
  EXPECT_EQ(yes.id, 1);
  const auto no = s.verify(logits, 3);  // tied with 1, but the lowest index is the argmax
  EXPECT_FALSE(no.accepted);
  EXPECT_EQ(no.id, 1);
}

// Whatever token is drafted, the verdict's id is distributed as sample()'s: the chain's
// distribution after top-k, top-p and temperature (a chi-square test over 40000 draws per
// draft, at the 0.1% level), and a draft the chain leaves out is never accepted.
TEST(Sampler, VerifyKeepsTheSamplersDistribution) {
  SamplerParams p = plain(0.9f);
  p.top_k = 5;
  p.top_p = 0.97f;
  const std::vector<float> logits{1.0f, 2.5f, 0.2f, 2.0f, -1.0f, 1.7f, 0.9f, -3.0f};
  Sampler reference(p);
  const auto dist = reference.distribution(logits);
  ASSERT_GE(dist.size(), 3u);
  ASSERT_LE(dist.size(), 5u);
  double total = 0;
  for (const auto& [id, prob] : dist) total += prob;
  EXPECT_NEAR(total, 1.0, 1e-12);
  for (int32_t draft : {1, 3, 0, 7}) {  // the best, a likely one, an unlikely one, one left out
    p.seed = 1000 + static_cast<uint64_t>(draft);
    Sampler s(p);
    std::map<int32_t, int> counts;
    int accepted = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i) {
      const auto v = s.verify(logits, draft);
      ++counts[v.id];
      if (v.accepted) {
        ++accepted;
        EXPECT_EQ(v.id, draft);
      }
    }
    double chi2 = 0, p_draft = 0;
    for (const auto& [id, prob] : dist) {
      const double expected = prob * n;
      const double got = counts.count(id) ? counts[id] : 0;
      chi2 += (got - expected) * (got - expected) / expected;
      if (id == draft) p_draft = prob;
      counts.erase(id);
    }
    EXPECT_TRUE(counts.empty()) << "ids outside the chain's candidates, draft " << draft;
    // 99.9th percentile of chi-square with at most 4 degrees of freedom.
    EXPECT_LT(chi2, 18.47) << "draft " << draft;
    // The acceptance rate is p(draft).
    EXPECT_NEAR(accepted / double(n), p_draft, 5 * std::sqrt(p_draft * (1 - p_draft) / n) + 1e-9)
        << "draft " << draft;
  }
}

}  // namespace
}  // namespace hearth::text
