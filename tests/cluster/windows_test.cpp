#include <gtest/gtest.h>

#include "hearth/base/error.h"
#include "hearth/cluster/windows.h"

namespace hearth::cluster {
namespace {

using W = std::vector<Window>;

// k = 1: one window per device covers the model.
TEST(RingWindows, OneRound) {
  const auto w = ring_windows(8, {3, 3, 2});
  EXPECT_EQ(ring_rounds(8, {3, 3, 2}), 1);
  EXPECT_EQ(w[0], (W{{0, 3}}));
  EXPECT_EQ(w[1], (W{{3, 6}}));
  EXPECT_EQ(w[2], (W{{6, 8}}));
}

// k = 2, W divides L: round r starts at r * W.
TEST(RingWindows, TwoRounds) {
  const auto w = ring_windows(8, {2, 1, 1});
  ASSERT_EQ(ring_rounds(8, {2, 1, 1}), 2);
  EXPECT_EQ(w[0], (W{{0, 2}, {4, 6}}));
  EXPECT_EQ(w[1], (W{{2, 3}, {6, 7}}));
  EXPECT_EQ(w[2], (W{{3, 4}, {7, 8}}));
}

TEST(RingWindows, FourRounds) {
  const auto w = ring_windows(8, {1, 1});
  ASSERT_EQ(ring_rounds(8, {1, 1}), 4);
  EXPECT_EQ(w[0], (W{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(w[1], (W{{1, 2}, {3, 4}, {5, 6}, {7, 8}}));
}

// W = 3 does not divide L = 8: the last round is partial, ending inside device 1's window
// (clipped) and leaving device 2 empty.
TEST(RingWindows, PartialLastRound) {
  const auto w = ring_windows(8, {1, 1, 1});
  ASSERT_EQ(ring_rounds(8, {1, 1, 1}), 3);
  EXPECT_EQ(w[0], (W{{0, 1}, {3, 4}, {6, 7}}));
  EXPECT_EQ(w[1], (W{{1, 2}, {4, 5}, {7, 8}}));
  EXPECT_EQ(w[2], (W{{2, 3}, {5, 6}, {8, 8}}));
  EXPECT_TRUE(w[2][2].empty());
  const auto c = ring_windows(7, {2, 3});  // round 1: [5, 7) on device 0, clipped device 1
  EXPECT_EQ(c[0], (W{{0, 2}, {5, 7}}));
  EXPECT_EQ(c[1], (W{{2, 5}, {7, 7}}));
}

// Every layer is computed exactly once, in order, for many shapes.
TEST(RingWindows, CoverEveryLayerOnceInOrder) {
  for (int L = 1; L <= 20; ++L) {
    for (const std::vector<int>& w :
         {std::vector<int>{1}, {1, 2}, {3, 1, 2}, {5, 5}, {2, 2, 2, 2}, {7, 1, 1}}) {
      const auto win = ring_windows(L, w);
      int next = 0;
      for (int r = 0; r < ring_rounds(L, w); ++r) {
        for (size_t m = 0; m < w.size(); ++m) {
          if (win[m][r].empty()) continue;
          EXPECT_EQ(win[m][r].begin, next) << "L=" << L << " m=" << m << " r=" << r;
          EXPECT_LE(win[m][r].size(), w[m]);
          next = win[m][r].end;
        }
      }
      EXPECT_EQ(next, L) << "L=" << L;
    }
  }
}

TEST(RingWindows, EvenSplit) {
  EXPECT_EQ(even_split(8, 3), (std::vector<int>{3, 3, 2}));
  EXPECT_EQ(even_split(8, 1), (std::vector<int>{8}));
  EXPECT_EQ(even_split(4, 4), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_THROW(even_split(2, 3), UsageError);
}

TEST(RingWindows, RejectsBadPlans) {
  EXPECT_THROW(ring_windows(8, {}), UsageError);
  EXPECT_THROW(ring_windows(8, {2, 0}), UsageError);
  EXPECT_THROW(ring_windows(0, {1}), UsageError);
  EXPECT_EQ(parse_plan("2,3,1", 3), (std::vector<int>{2, 3, 1}));
  EXPECT_THROW(parse_plan("2,3", 3), UsageError);
  EXPECT_THROW(parse_plan("2,,1", 3), UsageError);
  EXPECT_THROW(parse_plan("2,x,1", 3), UsageError);
  EXPECT_THROW(parse_plan("2,-1,1", 3), UsageError);
  EXPECT_THROW(parse_plan("", 1), UsageError);
}

}  // namespace
}  // namespace hearth::cluster
