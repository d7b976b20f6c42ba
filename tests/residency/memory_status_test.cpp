#include "hearth/residency/memory_status.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/residency/device_meter.h"
#include "hearth/residency/release_policy.h"

namespace hearth::residency {
namespace {

TEST(MemoryStatus, ParsesMeminfo) {
  const char* text =
      "MemTotal:       24684000 kB\nMemFree:        18000000 kB\nMemAvailable:   22000000 kB\n";
  EXPECT_EQ(meminfo_field(text, "MemTotal"), 24684000ull * 1024);
  EXPECT_EQ(meminfo_field(text, "MemAvailable"), 22000000ull * 1024);
  EXPECT_FALSE(meminfo_field(text, "SwapTotal"));
  EXPECT_FALSE(meminfo_field("MemTotal: lots kB\n", "MemTotal"));
  EXPECT_FALSE(meminfo_field("MemTotal: 99999999999999999999 kB\n", "MemTotal"));
}

TEST(MemoryStatus, FindsCgroupPaths) {
  const char* v1 = "5:devices:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/unified/p\n";
  EXPECT_EQ(cgroup_path(v1, true), "/process_api/abc");
  EXPECT_EQ(cgroup_path(v1, false), "/unified/p");
  EXPECT_EQ(cgroup_path("7:cpuset,memory:/a/b\n", true), "/a/b");
  EXPECT_FALSE(cgroup_path("3:cpu:/x\n", true));
  EXPECT_FALSE(cgroup_path("garbage\n::\n4:memory:relative\n", true));
}

TEST(MemoryStatus, ParsesLimits) {
  EXPECT_EQ(parse_limit("536870912\n"), 536870912ull);
  EXPECT_FALSE(parse_limit("max\n"));
  EXPECT_FALSE(parse_limit("12k"));
  EXPECT_FALSE(parse_limit(""));
}

TEST(MemoryStatus, ReadsThisMachine) {
  const auto s = read_memory_status();
  EXPECT_GT(s.total, 0u);
  EXPECT_LE(s.available, s.total);
  EXPECT_FALSE(s.source.empty());
}

TEST(MemoryStatus, PressureIsTheDropOverTotal) {
  const MemoryStatus base{1000, 800, "t"};
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{1000, 600, "t"}), 0.2);
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{1000, 900, "t"}), 0.0);
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{0, 0, "t"}), 0.0);
}

TEST(StepStats, FieldsRoundTripAndRejectBadValues) {
  StepStats s;
  s.compute_ms = 1.5;
  s.reload_bytes = 4096;
  s.major_faults = 3;
  s.pressure = 0.25;
  const auto f = to_fields(s);
  ASSERT_EQ(f.size(), 8u);
  const auto back = from_fields(f);
  EXPECT_EQ(back.compute_ms, 1.5);
  EXPECT_EQ(back.reload_bytes, 4096);
  EXPECT_EQ(back.major_faults, 3);
  EXPECT_EQ(back.pressure, 0.25);
  const std::vector<std::pair<std::string, double>> bad{
      {"compute_ms", NAN}, {"wait_ms", -5}, {"pressure", 7}, {"unknown", 1}};
  const auto b = from_fields(bad);
  EXPECT_EQ(b.compute_ms, 0);
  EXPECT_EQ(b.wait_ms, 0);
  EXPECT_EQ(b.pressure, 1.0);
  DeviceTotals t;
  t.add(s);
  t.add(b);
  EXPECT_EQ(t.steps, 2u);
  EXPECT_DOUBLE_EQ(t.sum.compute_ms, 1.5);
  EXPECT_DOUBLE_EQ(t.pressure_max, 1.0);
  EXPECT_DOUBLE_EQ(t.pressure_mean(), 0.625);
}

}  // namespace
}  // namespace hearth::residency

namespace hearth::residency {
namespace {

TEST(ReleasePolicy, AutoReleasesOnlyWhenTheShareDoesNotFit) {
  const MemoryStatus mem{1000, 300, "t"};
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 250, 0, mem));
  EXPECT_TRUE(release_enabled(ReleaseMode::kAuto, 400, 0, mem));
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 400, 200, mem));  // half already cached
  EXPECT_TRUE(release_enabled(ReleaseMode::kOn, 1, 0, mem));
  EXPECT_FALSE(release_enabled(ReleaseMode::kOff, 5000, 0, mem));
  EXPECT_EQ(parse_release_mode("auto"), ReleaseMode::kAuto);
  EXPECT_THROW(parse_release_mode("yes"), UsageError);
}

}  // namespace
}  // namespace hearth::residency
