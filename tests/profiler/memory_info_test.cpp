// cgroup-aware memory on constructed /proc and /sys/fs/cgroup trees.
#include "hearth/profiler/memory_info.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "hearth/base/error.h"
#include "support/scratch_dir.h"

namespace hearth::profiler {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = uint64_t{1} << 20;

class MemoryInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = hearth::testing::scratch_dir() /
           ("hearth_meminfo_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "cg");
    roots_.meminfo = (dir_ / "meminfo").string();
    roots_.self_cgroup = (dir_ / "self_cgroup").string();
    roots_.cgroup_root = (dir_ / "cg").string();
    // 16 GiB host, 12 GiB available, 2 GiB swap free.
    write("meminfo",
          "MemTotal:       16777216 kB\nMemFree:         1000 kB\n"
          "MemAvailable:   12582912 kB\nSwapTotal:       4194304 kB\n"
          "SwapFree:        2097152 kB\nAnonPages:       3145728 kB\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const fs::path& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
  MemoryRoots roots_;
};

TEST_F(MemoryInfoTest, NoCgroupFileUsesMeminfo) {
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 16384 * kMiB);
  EXPECT_EQ(m.available_bytes, 12288 * kMiB);
  EXPECT_EQ(m.swap_free_bytes, 2048 * kMiB);
  EXPECT_EQ(m.anon_bytes, 3072 * kMiB);  // Android's d^swapout
  EXPECT_EQ(m.cgroup_limit_bytes, 0u);
  EXPECT_EQ(m.source, "meminfo");
}

TEST_F(MemoryInfoTest, CgroupV2LimitIsTheMemory) {
  write("self_cgroup", "0::/box/app\n");
  write("cg/box/app/memory.max", "4294967296\n");  // 4 GiB
  write("cg/box/app/memory.current", std::to_string(1536 * kMiB) + "\n");
  // v2 counts the active and inactive file pages in one `file` line.
  write("cg/box/app/memory.stat", "anon 100\nfile " + std::to_string(512 * kMiB) +
                                      "\ninactive_file " + std::to_string(500 * kMiB) +
                                      "\nactive_file " + std::to_string(12 * kMiB) + "\n");
  write("cg/box/memory.max", "max\n");
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 4096 * kMiB);
  // 4 GiB - (1.5 GiB used - 0.5 GiB reclaimable page cache) = 3 GiB.
  EXPECT_EQ(m.available_bytes, 3072 * kMiB);
  EXPECT_EQ(m.cgroup_limit_bytes, 4096 * kMiB);
  EXPECT_EQ(m.source, "cgroup v2 /box/app");
}

TEST_F(MemoryInfoTest, CgroupV2TightestAncestorWins) {
  write("self_cgroup", "0::/box/app\n");
  write("cg/box/app/memory.max", "max\n");
  write("cg/box/memory.max", std::to_string(2048 * kMiB) + "\n");
  write("cg/box/memory.current", std::to_string(1800 * kMiB) + "\n");
  write("cg/box/memory.swap.max", "0\n");
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 2048 * kMiB);
  EXPECT_EQ(m.available_bytes, 248 * kMiB);
  EXPECT_EQ(m.swap_free_bytes, 0u);
}

TEST_F(MemoryInfoTest, CgroupV1LimitAndUnlimitedValue) {
  write("self_cgroup", "5:cpuacct,cpu:/\n4:memory:/pod/c1\n0::/\n");
  write("cg/memory/pod/c1/memory.limit_in_bytes", std::to_string(6144 * kMiB) + "\n");
  write("cg/memory/pod/c1/memory.usage_in_bytes", std::to_string(2048 * kMiB) + "\n");
  write("cg/memory/pod/c1/memory.stat", "cache 5\ntotal_inactive_file " +
                                            std::to_string(1000 * kMiB) + "\ntotal_active_file " +
                                            std::to_string(24 * kMiB) + "\n");
  write("cg/memory/pod/memory.limit_in_bytes", "9223372036854771712\n");
  write("cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 6144 * kMiB);
  EXPECT_EQ(m.available_bytes, 5120 * kMiB);
  EXPECT_EQ(m.source, "cgroup v1 /pod/c1");
}

TEST_F(MemoryInfoTest, CgroupV1NamespacedMountReadsTheRoot) {
  // The kernel prints the host-side path; inside the container only the root is mounted.
  write("self_cgroup", "4:memory:/docker/abc\n");
  write("cg/memory/memory.limit_in_bytes", std::to_string(1024 * kMiB) + "\n");
  write("cg/memory/memory.usage_in_bytes", std::to_string(100 * kMiB) + "\n");
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 1024 * kMiB);
  EXPECT_EQ(m.available_bytes, 924 * kMiB);
}

TEST_F(MemoryInfoTest, HostAvailableStillBoundsALooseLimit) {
  write("self_cgroup", "0::/a\n");
  write("cg/a/memory.max", std::to_string(32768 * kMiB) + "\n");  // above the host's RAM
  const auto m = read_memory_info(roots_);
  EXPECT_EQ(m.total_bytes, 16384 * kMiB);
  EXPECT_EQ(m.available_bytes, 12288 * kMiB);
}

TEST_F(MemoryInfoTest, BadFilesAreNamed) {
  write("self_cgroup", "0::/a\n");
  write("cg/a/memory.max", "lots\n");
  try {
    read_memory_info(roots_);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("memory.max"), std::string::npos) << e.what();
  }
  write("meminfo", "MemTotal: 100 kB\n");
  try {
    read_memory_info(roots_);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("MemAvailable"), std::string::npos) << e.what();
  }
  roots_.meminfo = (dir_ / "absent").string();
  EXPECT_THROW(read_memory_info(roots_), IoError);
}

// The runtime reads the same tree through residency::read_memory_status: its figures beside
// the profile's come from the level that bounds them.
TEST_F(MemoryInfoTest, RuntimeFiguresComeFromTheSameReader) {
  write("meminfo", "MemTotal: 16777216 kB\nMemFree: 10485760 kB\nMemAvailable: 12582912 kB\n");
  write("self_cgroup", "4:memory:/pod/c1\n");
  write("cg/memory/pod/c1/memory.limit_in_bytes", std::to_string(6144 * kMiB) + "\n");
  write("cg/memory/pod/c1/memory.usage_in_bytes", std::to_string(2048 * kMiB) + "\n");
  write("cg/memory/pod/c1/memory.stat", "total_inactive_file " + std::to_string(1000 * kMiB) +
                                            "\ntotal_active_file " + std::to_string(24 * kMiB) +
                                            "\nmapped_file " + std::to_string(8 * kMiB) + "\n");
  const auto s = residency::read_memory_status(roots_);
  EXPECT_EQ(s.total, 6144 * kMiB);
  EXPECT_EQ(s.available, read_memory_info(roots_).available_bytes);
  // limit - usage: page cache counted as used; the host's MemFree bounds it too.
  EXPECT_EQ(s.available_unreclaimed, 4096 * kMiB);
  EXPECT_EQ(s.file_bytes, 1024 * kMiB);
  EXPECT_EQ(s.mapped_file_bytes, 8 * kMiB);
  // Kernels before 3.14 have no MemAvailable: MemFree stands in.
  write("meminfo", "MemTotal: 16777216 kB\nMemFree: 1000 kB\n");
  EXPECT_EQ(residency::read_memory_status(roots_).available, 1000 * 1024u);
}

TEST(MemoryInfoReal, ThisMachineIsSane) {
  const auto m = read_memory_info();
  EXPECT_GT(m.total_bytes, uint64_t{64} << 20);
  EXPECT_LE(m.available_bytes, m.total_bytes);
  EXPECT_GT(m.available_bytes, 0u);
}

}  // namespace
}  // namespace hearth::profiler
