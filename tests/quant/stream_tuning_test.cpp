// The prefetch tables per CPU (quant/stream_tuning.h): which CPU gets which, and the names
// HEARTH_STREAM_TUNING takes. The kernels under each table are tested by the
// StreamTuning.<name>.* entries in CMakeLists.txt (the bitwise suites run with the variable set).
#include "hearth/quant/stream_tuning.h"

#include <gtest/gtest.h>

namespace hearth::quant {
namespace {

TEST(StreamTuning, AmdZen5AndLaterTakeTheirTableAndEveryOtherCpuZen4s) {
  EXPECT_EQ(stream_tuning_for_cpu(true, 0x1A).cpu, StreamCpu::kZen5);
  EXPECT_EQ(stream_tuning_for_cpu(true, 0x1B).cpu, StreamCpu::kZen5);
  EXPECT_EQ(stream_tuning_for_cpu(true, 0x19).cpu, StreamCpu::kZen4);   // Zen 3 and 4
  EXPECT_EQ(stream_tuning_for_cpu(true, 0x17).cpu, StreamCpu::kZen4);   // Zen 1 and 2
  EXPECT_EQ(stream_tuning_for_cpu(false, 0x06).cpu, StreamCpu::kZen4);  // Intel
  EXPECT_EQ(stream_tuning_for_cpu(false, 0x1A).cpu, StreamCpu::kZen4);
}

TEST(StreamTuning, NamesFindTheirTables) {
  for (const StreamCpu cpu : {StreamCpu::kZen4, StreamCpu::kZen5}) {
    const StreamTuning& t = stream_tuning_for_cpu(true, cpu == StreamCpu::kZen5 ? 0x1A : 0x19);
    ASSERT_EQ(stream_tuning_named(t.name), &t) << t.name;
  }
  EXPECT_EQ(stream_tuning_named("zen6"), nullptr);
  EXPECT_EQ(stream_tuning_named(""), nullptr);
  EXPECT_EQ(stream_tuning_named("ZEN4"), nullptr);
}

// Zen 4 keeps the plain GGUF kernels for short rows (their extra prefetches slowed them at 2
// threads there); Zen 5 takes the long-row variants for every row.
TEST(StreamTuning, LongRowThresholdPerTable) {
  EXPECT_GT(stream_tuning_for_cpu(true, 0x19).long_row_bytes, size_t{16} << 10);
  EXPECT_EQ(stream_tuning_for_cpu(true, 0x1A).long_row_bytes, 0u);
}

}  // namespace
}  // namespace hearth::quant
