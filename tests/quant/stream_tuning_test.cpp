// The prefetch tables per CPU (quant/stream_tuning.h): which CPU gets which, and the names
// HEARTH_STREAM_TUNING takes. The kernels under each table are tested by the
// StreamTuning.<name>.* entries in CMakeLists.txt (the bitwise suites run with the variable set).
#include "hearth/quant/stream_tuning.h"

#include <gtest/gtest.h>

namespace hearth::quant {
namespace {

CpuVendorFamily amd(int family) {
  return {.amd = true, .family = family};
}
CpuVendorFamily intel(int model) {
  return {.intel = true, .family = 0x6, .model = model};
}

TEST(StreamTuning, EachMeasuredCpuTakesItsTableAndEveryOtherCpuZen4s) {
  EXPECT_EQ(stream_tuning_for_cpu(amd(0x1A)).name, "zen5");
  EXPECT_EQ(stream_tuning_for_cpu(amd(0x1B)).name, "zen5");
  EXPECT_EQ(stream_tuning_for_cpu(amd(0x19)).name, "zen4");    // Zen 3 and 4
  EXPECT_EQ(stream_tuning_for_cpu(amd(0x17)).name, "zen4");    // Zen 1 and 2
  EXPECT_EQ(stream_tuning_for_cpu(intel(0x8F)).name, "spr");   // Sapphire Rapids
  EXPECT_EQ(stream_tuning_for_cpu(intel(0xCF)).name, "spr");   // Emerald Rapids
  EXPECT_EQ(stream_tuning_for_cpu(intel(0x6A)).name, "zen4");  // Ice Lake server
  EXPECT_EQ(stream_tuning_for_cpu(intel(0x55)).name, "zen4");  // Skylake / Cascade Lake
  // The family and model alone do not pick a table: an unknown vendor keeps Zen 4's.
  EXPECT_EQ(stream_tuning_for_cpu({.family = 0x1A}).name, "zen4");
  EXPECT_EQ(stream_tuning_for_cpu({.family = 0x6, .model = 0xCF}).name, "zen4");
  // The spr table runs the Zen 5 distances.
  EXPECT_EQ(stream_tuning_for_cpu(intel(0xCF)).cpu, StreamCpu::kZen5);
}

TEST(StreamTuning, NamesFindTheirTables) {
  for (const CpuVendorFamily& id : {amd(0x19), amd(0x1A), intel(0xCF)}) {
    const StreamTuning& t = stream_tuning_for_cpu(id);
    ASSERT_EQ(stream_tuning_named(t.name), &t) << t.name;
  }
  EXPECT_EQ(stream_tuning_named("zen6"), nullptr);
  EXPECT_EQ(stream_tuning_named(""), nullptr);
  EXPECT_EQ(stream_tuning_named("ZEN4"), nullptr);
  EXPECT_EQ(stream_tuning_named("SPR"), nullptr);
}

// Zen 4 keeps the plain GGUF kernels for short rows (their extra prefetches slowed them at 2
// threads there); Zen 5 and Sapphire Rapids take the long-row variants for every row.
TEST(StreamTuning, LongRowThresholdPerTable) {
  EXPECT_GT(stream_tuning_for_cpu(amd(0x19)).long_row_bytes, size_t{16} << 10);
  EXPECT_EQ(stream_tuning_for_cpu(amd(0x1A)).long_row_bytes, 0u);
  EXPECT_EQ(stream_tuning_for_cpu(intel(0xCF)).long_row_bytes, 0u);
}

}  // namespace
}  // namespace hearth::quant
