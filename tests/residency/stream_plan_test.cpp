// The residency planner (residency/stream_plan.h): what stays resident, what is streamed,
// and how the streamed part spreads over the use order.
#include "hearth/residency/stream_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hearth::residency {
namespace {

// `layers` layers of four groups each; group g of every layer has bytes[g], laid out in the
// file one after another from offset 4096 (aligned like GGUF data, 32 bytes).
StreamPlanInput layered(int layers, std::vector<uint64_t> bytes, uint64_t fixed, uint64_t budget) {
  StreamPlanInput in;
  uint64_t off = 4096;
  for (int l = 0; l < layers; ++l) {
    for (int g = 0; g < 4; ++g) {
      in.matrices.push_back(PlannedMatrix{l, g, off, bytes[static_cast<size_t>(g)]});
      off += (bytes[static_cast<size_t>(g)] + 31) / 32 * 32;
    }
  }
  in.fixed_bytes = fixed;
  in.budget_bytes = budget;
  return in;
}

uint64_t sum_streamed(const StreamPlanInput& in, const StreamPlan& p) {
  uint64_t s = 0;
  for (size_t i = 0; i < in.matrices.size(); ++i) s += p.streamed[i] ? in.matrices[i].bytes : 0;
  return s;
}

TEST(StreamPlan, EverythingResidentWhenItFits) {
  const auto in = layered(8, {300000, 100000, 600000, 300000}, 5000, 20'000'000);
  const auto p = plan_stream(in);
  EXPECT_TRUE(p.fits());
  EXPECT_EQ(p.buffer_bytes, 0u);
  EXPECT_EQ(p.streamed_bytes, 0u);
  EXPECT_EQ(p.assigned_bytes, 5000u + 8u * 1'300'000u);
  EXPECT_EQ(p.resident_bytes, p.assigned_bytes);
  EXPECT_TRUE(std::none_of(p.streamed.begin(), p.streamed.end(), [](bool b) { return b; }));
}

TEST(StreamPlan, StreamsOnlyTheExcessPlusTheBuffer) {
  // 40 layers of 1.3 MB in 30 MB: about 22 MB must come from disk each token.
  const auto in = layered(40, {300000, 100000, 600000, 300000}, 10000, 30'000'000);
  const auto p = plan_stream(in);
  ASSERT_FALSE(p.fits());
  EXPECT_GE(p.buffer_bytes, min_stream_buffer(in));
  EXPECT_EQ(p.weight_budget_bytes, in.budget_bytes - p.buffer_bytes);
  EXPECT_EQ(p.streamed_bytes, sum_streamed(in, p));
  // The resident part fits what is left after the buffer ...
  EXPECT_LE(p.resident_bytes, p.weight_budget_bytes);
  // ... and no more is streamed than the excess over that, plus one matrix of rounding.
  const uint64_t excess = p.assigned_bytes - p.weight_budget_bytes;
  EXPECT_GE(p.streamed_bytes, excess);
  EXPECT_LE(p.streamed_bytes, excess + 600000);
  // Items are the streamed groups in use order, each within the buffer's half.
  uint64_t item_bytes = 0;
  int prev = -1;
  for (const auto& it : p.items) {
    const int key = it.layer * 4 + it.group;
    EXPECT_GT(key, prev);
    prev = key;
    EXPECT_LE(2 * it.bytes, p.buffer_bytes);
    item_bytes += it.bytes;
  }
  EXPECT_GE(item_bytes, p.streamed_bytes);  // aligned extents cover the matrices
}

TEST(StreamPlan, SpreadsTheStreamedPartOverTheUseOrder) {
  // Equal matrices, half of them streamed: the walk alternates, so the longest run of
  // streamed matrices in a row is short (reads hide behind the resident ones between).
  const auto in = layered(32, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, 0, 64u << 20);
  const auto p = plan_stream(in);
  ASSERT_FALSE(p.fits());
  int run = 0, longest = 0, first_half = 0;
  for (size_t i = 0; i < p.streamed.size(); ++i) {
    run = p.streamed[i] ? run + 1 : 0;
    longest = std::max(longest, run);
    if (i < p.streamed.size() / 2 && p.streamed[i]) ++first_half;
  }
  EXPECT_LE(longest, 3);
  const int total = static_cast<int>(std::count(p.streamed.begin(), p.streamed.end(), true));
  EXPECT_NEAR(first_half, total / 2, 2);
}

TEST(StreamPlan, RequestedBufferIsKeptAndCountsAgainstTheBudget) {
  auto in = layered(16, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, 0, 40u << 20);
  in.buffer_bytes = 10u << 20;
  const auto p = plan_stream(in);
  EXPECT_EQ(p.buffer_bytes, 10u << 20);
  EXPECT_EQ(p.streamed_bytes, (64u << 20) - (30u << 20));
}

TEST(StreamPlan, EverythingStreamedWhenTheBudgetHoldsLessThanTheBuffer) {
  const auto in = layered(4, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, 1 << 20, 1 << 20);
  const auto p = plan_stream(in);
  EXPECT_EQ(p.streamed_bytes, 16u << 20);
  EXPECT_EQ(p.resident_bytes, 1u << 20);  // the fixed part stays
  EXPECT_EQ(p.items.size(), 16u);
}

TEST(StreamPlan, AlignedSpanRoundsOutBothEnds) {
  EXPECT_EQ(aligned_span(4096, 4096, 4096), 4096u);
  EXPECT_EQ(aligned_span(4100, 10, 4096), 4096u);
  EXPECT_EQ(aligned_span(4090, 10, 4096), 8192u);
  EXPECT_EQ(aligned_span(0, 0, 4096), 0u);
}

// Matrices larger than the slice size are read in row slices: every streamed matrix's rows
// are covered once, in order, by contiguous file ranges; the groups read in parts list every
// matrix of the group in view order; the minimum buffer is two of the largest pieces.
TEST(StreamPlan, LargeMatricesAreReadInRowSlices) {
  auto in = layered(4, {300000, 100000, 600000, 300000}, 5000, 1'500'000);
  for (auto& m : in.matrices) m.rows = static_cast<int64_t>(m.bytes / 100);  // 100-byte rows
  in.slice_bytes = 128000;
  const auto p = plan_stream(in);
  ASSERT_FALSE(p.fits());
  ASSERT_FALSE(p.sliced.empty());
  uint64_t largest = 0;
  for (const auto& it : p.items) {
    largest = std::max(largest, it.bytes);
    ASSERT_FALSE(it.ranges.empty());
    if (it.part >= 0) {
      ASSERT_EQ(it.matrices.size(), 1u);
      ASSERT_EQ(it.ranges.size(), 1u);
      const auto& m = in.matrices[static_cast<size_t>(it.matrices[0])];
      EXPECT_EQ(it.ranges[0].offset, m.offset + static_cast<uint64_t>(it.row_begin) * 100);
      EXPECT_EQ(it.ranges[0].bytes, static_cast<uint64_t>(it.row_end - it.row_begin) * 100);
      EXPECT_LE(it.ranges[0].bytes, in.slice_bytes);
    } else {
      for (int mi : it.matrices)
        EXPECT_LE(in.matrices[static_cast<size_t>(mi)].bytes, in.slice_bytes);
    }
  }
  EXPECT_EQ(p.buffer_bytes, std::max(in.buffer_bytes, min_stream_buffer(in)));
  EXPECT_LE(min_stream_buffer(in), 2 * (in.slice_bytes + 2 * in.align));
  // Each sliced group: its matrices in order, each whole (resident) or cut into slices that
  // cover its rows; the streamed parts are exactly the items of that group, in order.
  for (const auto& sg : p.sliced) {
    std::vector<const StreamItem*> items;
    for (const auto& it : p.items) {
      if (it.layer == sg.layer && it.group == sg.group) items.push_back(&it);
    }
    size_t next_item = 0;
    int matrix = -1;
    int64_t row = 0;
    for (size_t j = 0; j < sg.parts.size(); ++j) {
      const PlanPart& part = sg.parts[j];
      if (part.matrix != matrix) {
        if (matrix >= 0) {
          EXPECT_EQ(row, in.matrices[static_cast<size_t>(matrix)].rows);
        }
        EXPECT_GT(part.matrix, matrix);
        matrix = part.matrix;
        row = 0;
      }
      EXPECT_EQ(part.row_begin, row);
      row = part.row_end;
      EXPECT_EQ(part.streamed, p.streamed[static_cast<size_t>(part.matrix)]);
      if (part.streamed) {
        ASSERT_LT(next_item, items.size());
        EXPECT_EQ(items[next_item]->part, static_cast<int>(j));
        ++next_item;
      } else {
        EXPECT_EQ(part.row_end, in.matrices[static_cast<size_t>(part.matrix)].rows);
      }
    }
    EXPECT_EQ(row, in.matrices[static_cast<size_t>(matrix)].rows);
    EXPECT_EQ(next_item, items.size());
  }
}

// The pressure target's rules: slices of a quarter of 6% of the memory (at least 64 KiB), and
// a buffer cap of 6% less its untracked part (a sixth, at least 1.5 MiB) less the working
// buffers, never below the minimum buffer.
TEST(StreamPlan, PressureTargetSetsSliceAndBufferCap) {
  const uint64_t MiB = uint64_t{1} << 20;
  EXPECT_EQ(stream_slice_bytes(100 * MiB), static_cast<uint64_t>(0.06 * 100 * MiB / 4));
  EXPECT_EQ(stream_slice_bytes(1 * MiB), 64u << 10);
  EXPECT_NEAR(static_cast<double>(stream_buffer_cap(100 * MiB, 2 * MiB, MiB)), 2.5 * MiB, 1.0);
  EXPECT_EQ(stream_buffer_cap(100 * MiB, 10 * MiB, 3 * MiB), 3 * MiB);
  EXPECT_NEAR(static_cast<double>(stream_buffer_cap(600 * MiB, 2 * MiB, MiB, 0.6)), 298.0 * MiB,
              1.0);
}

}  // namespace
}  // namespace hearth::residency
