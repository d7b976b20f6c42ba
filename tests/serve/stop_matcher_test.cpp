#include "hearth/serve/stop_matcher.h"

#include <gtest/gtest.h>

namespace hearth::serve {
namespace {

// Feeds `pieces` and returns everything emitted, including the final flush.
std::string run(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopSplitAcrossPiecesIsNeverEmitted) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("hello E"), "hello ");  // "E" might start "END"
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("D and more"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"END"});
  EXPECT_EQ(run(m, {"E", "N", "X"}), "ENX");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"zz", "b"});
  EXPECT_EQ(run(m, {"aazz b"}), "aa");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, HeldPrefixIsFlushedWhenGenerationEnds) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(m.push("text <|e"), "text ");
  EXPECT_EQ(m.flush(), "<|e");
}

TEST(StopMatcher, EmptyStopStringsAreIgnored) {
  StopMatcher m({"", "q"});
  EXPECT_EQ(run(m, {"abqc"}), "ab");
}

}  // namespace
}  // namespace hearth::serve
