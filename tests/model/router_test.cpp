// The mixture-of-experts router (model/router.h) against hand-computed routes.
#include "hearth/model/router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace hearth::model {
namespace {

TEST(Router, KeepsTheKMostProbableRescaledToOne) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 2.5f};
  int32_t experts[2];
  float weights[2];
  route_token(logits.data(), 5, 2, experts, weights);
  EXPECT_EQ(experts[0], 4);
  EXPECT_EQ(experts[1], 1);
  // softmax then rescaling the two kept = softmax over the two kept logits.
  const double w4 = 1.0 / (1.0 + std::exp(2.0 - 2.5));
  EXPECT_NEAR(weights[0], w4, 1e-6);
  EXPECT_NEAR(weights[1], 1.0 - w4, 1e-6);
}

TEST(Router, TiesGoToTheLowerIndex) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 1.0f, 3.0f};
  int32_t experts[3];
  float weights[3];
  route_token(logits.data(), 5, 3, experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 2);
  EXPECT_EQ(experts[2], 4);
  for (float w : weights) EXPECT_NEAR(w, 1.0 / 3, 1e-6);
}

TEST(Router, EveryExpertWhenKIsTheCount) {
  const std::vector<float> logits = {-3.0f, 0.0f, 1.0f, -1.0f};
  int32_t experts[4];
  float weights[4];
  route_token(logits.data(), 4, 4, experts, weights);
  EXPECT_EQ(std::vector<int32_t>(experts, experts + 4), (std::vector<int32_t>{2, 1, 3, 0}));
  double sum = 0, z = 0;
  for (float l : logits) z += std::exp(l);
  for (int j = 0; j < 4; ++j) {
    sum += weights[j];
    EXPECT_NEAR(weights[j], std::exp(logits[experts[j]]) / z, 1e-6);
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

// Large logits do not overflow: the softmax subtracts the largest first.
TEST(Router, LargeLogitsStayFinite) {
  const std::vector<float> logits = {1000.0f, 999.0f, -1000.0f};
  int32_t experts[1];
  float weights[1];
  route_token(logits.data(), 3, 1, experts, weights);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(weights[0], 1.0f);
}

}  // namespace
}  // namespace hearth::model
