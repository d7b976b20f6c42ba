#include "hearth/residency/memory_status.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/residency/device_meter.h"
#include "hearth/residency/release_policy.h"
#include "support/scratch_dir.h"

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

TEST(MemoryStatus, ParsesMemoryStatFields) {
  const char* stat = "cache 4096\nrss 8192\ninactive_file 100\nactive_file 20\n";
  EXPECT_EQ(memory_stat_field(stat, "rss"), 8192u);
  EXPECT_EQ(memory_stat_field(stat, "cache"), 4096u);
  EXPECT_FALSE(memory_stat_field(stat, "file"));
  EXPECT_FALSE(memory_stat_field(stat, "cach"));  // whole keys only
  EXPECT_FALSE(memory_stat_field("rss x\n", "rss"));
  EXPECT_FALSE(memory_stat_field("rss 99999999999999999999\n", "rss"));
}

TEST(MemoryStatus, FilePagesOfACgroupV1PreferTheSubtreeTotals) {
  const char* v1 =
      "cache 9000\ninactive_file 100\nactive_file 20\ntotal_cache 9999\n"
      "total_inactive_file 1000\ntotal_active_file 300\n";
  EXPECT_EQ(memory_stat_file_bytes(v1, true), 1300u);
  EXPECT_EQ(memory_stat_file_bytes("cache 9000\ninactive_file 100\nactive_file 20\n", true), 120u);
  // One of the pair missing: the next source, not half a sum.
  EXPECT_EQ(memory_stat_file_bytes("cache 9000\ninactive_file 100\n", true), 9000u);
  EXPECT_FALSE(memory_stat_file_bytes("rss 5\n", true));
}

TEST(MemoryStatus, FilePagesOfACgroupV2AreItsFileLine) {
  EXPECT_EQ(memory_stat_file_bytes("anon 5\nfile 777\ninactive_file 100\nactive_file 20\n", false),
            777u);
  EXPECT_EQ(memory_stat_file_bytes("anon 5\ninactive_file 100\nactive_file 20\n", false), 120u);
  EXPECT_FALSE(memory_stat_file_bytes("anon 5\ncache 9\n", false));
}

TEST(MemoryStatus, ReadsThisMachine) {
  const auto s = read_memory_status();
  EXPECT_GT(s.total, 0u);
  EXPECT_LE(s.available, s.total);
  EXPECT_LE(s.available_unreclaimed, s.total);
  // In a cgroup reclaimable cache only adds to what is available; on the host MemAvailable
  // also subtracts the kernel's reserves, so it can be a little below MemFree.
  if (s.source != "meminfo") {
    EXPECT_GE(s.available, s.available_unreclaimed);
  }
  EXPECT_FALSE(s.source.empty());
}

TEST(MemoryStatus, PressureIsTheDropOverTotal) {
  const MemoryStatus base{1000, 800, "t"};
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{1000, 600, "t"}), 0.2);
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{1000, 900, "t"}), 0.0);
  EXPECT_DOUBLE_EQ(memory_pressure(base, MemoryStatus{0, 0, "t"}), 0.0);
}

TEST(MemoryStatus, UnreclaimedPressureUsesTheOldFigure) {
  const MemoryStatus base{1000, 900, "t", 800, 0};
  const MemoryStatus now{1000, 880, "t", 300, 580};  // 500 of page cache read in
  EXPECT_DOUBLE_EQ(memory_pressure(base, now), 0.02);
  EXPECT_DOUBLE_EQ(memory_pressure_unreclaimed(base, now), 0.5);
  EXPECT_DOUBLE_EQ(memory_pressure_unreclaimed(now, base), 0.0);
}

// In a real cgroup v1 memory cgroup limited to 64 MiB, a child reads a 96 MiB file through
// the page cache: the cache fills the cgroup, so limit - usage falls to near zero, but the
// paper's available (file pages counted as reclaimable) stays near the limit.
class CgroupV1Test : public ::testing::Test {
 protected:
  static constexpr uint64_t kLimit = uint64_t{64} << 20;
  static constexpr uint64_t kFile = uint64_t{96} << 20;

  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    if (!cg_.empty()) {
      // Charges of a cgroup with no tasks left move to its parent; rmdir may briefly see
      // the exiting child.
      for (int i = 0; i < 50 && rmdir(cg_.c_str()) != 0 && errno == EBUSY; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      EXPECT_FALSE(std::filesystem::exists(cg_)) << "could not remove " << cg_;
    }
    if (!file_.empty()) std::filesystem::remove(file_);
  }

  static bool write_text(const std::string& path, const std::string& text) {
    std::ofstream f(path);
    f << text;
    f.flush();
    return static_cast<bool>(f);
  }

  std::string cg_, file_;
  pid_t child_ = -1;
};

// What the child measured, sent back through a pipe.
struct ChildResult {
  uint64_t total = 0;
  uint64_t base_available = 0, base_unreclaimed = 0;
  uint64_t now_available = 0, now_unreclaimed = 0, now_file = 0;
  double pressure = 0, pressure_unreclaimed = 0;
  char source[64] = {};
  int error = 0;  // errno of a failed read, or -1 when the status was not the cgroup's
};

TEST_F(CgroupV1Test, FileCacheCountsAsAvailable) {
  const std::string root = "/sys/fs/cgroup/memory";
  if (geteuid() != 0 || access((root + "/cgroup.procs").c_str(), W_OK) != 0) {
    GTEST_SKIP() << "needs root and a writable cgroup v1 memory hierarchy at " << root;
  }
  const std::string cg = root + "/hearth-memstatus-test-" + std::to_string(getpid());
  if (mkdir(cg.c_str(), 0755) != 0) {
    GTEST_SKIP() << "cannot create " << cg << ": " << std::strerror(errno);
  }
  cg_ = cg;
  if (!write_text(cg + "/memory.limit_in_bytes", std::to_string(kLimit))) {
    GTEST_SKIP() << "cannot set memory.limit_in_bytes of " << cg;
  }

  // The file, written outside the cgroup and then dropped from the cache, so that the
  // child's reads charge it.
  file_ =
      (hearth::testing::scratch_dir() / ("hearth_memstatus_" + std::to_string(getpid()) + ".bin"))
          .string();
  {
    const int fd = open(file_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::vector<char> block(1 << 20, 'h');
    for (uint64_t done = 0; done < kFile; done += block.size()) {
      ASSERT_EQ(write(fd, block.data(), block.size()), static_cast<ssize_t>(block.size()));
    }
    ASSERT_EQ(fsync(fd), 0);
    ASSERT_EQ(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    close(fd);
  }

  int go[2], back[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(back), 0);
  child_ = fork();
  ASSERT_GE(child_, 0) << std::strerror(errno);
  if (child_ == 0) {
    // The child: no gtest, only plain calls and _exit.
    close(go[1]);
    close(back[0]);
    char c = 0;
    ChildResult r;
    if (read(go[0], &c, 1) != 1) _exit(1);
    try {
      const auto base = read_memory_status();
      const int fd = open(file_.c_str(), O_RDONLY);
      std::vector<char> buf(1 << 20);
      ssize_t n = fd < 0 ? -1 : 1;
      while (n > 0) n = read(fd, buf.data(), buf.size());
      if (n < 0) r.error = errno;
      if (fd >= 0) close(fd);
      const auto now = read_memory_status();
      if (now.source.rfind("cgroup v1", 0) != 0) r.error = -1;
      r.total = now.total;
      r.base_available = base.available;
      r.base_unreclaimed = base.available_unreclaimed;
      r.now_available = now.available;
      r.now_unreclaimed = now.available_unreclaimed;
      r.now_file = now.file_bytes;
      r.pressure = memory_pressure(base, now);
      r.pressure_unreclaimed = memory_pressure_unreclaimed(base, now);
      std::strncpy(r.source, now.source.c_str(), sizeof(r.source) - 1);
    } catch (...) {
      r.error = -2;
    }
    const bool ok = write(back[1], &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r));
    _exit(ok ? 0 : 1);
  }
  close(go[0]);
  close(back[1]);
  const bool moved = write_text(cg + "/cgroup.procs", std::to_string(child_));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  ChildResult r;
  const ssize_t got = read(back[0], &r, sizeof(r));
  close(back[0]);
  int status = 0;
  waitpid(child_, &status, 0);
  child_ = -1;
  if (!moved) GTEST_SKIP() << "cannot move a process into " << cg;
  ASSERT_EQ(got, static_cast<ssize_t>(sizeof(r))) << "child status " << status;
  ASSERT_EQ(r.error, 0) << "child: errno or not in the cgroup; source '" << r.source << "'";
  EXPECT_EQ(r.total, kLimit) << r.source;
  const auto mib = [](uint64_t b) { return static_cast<double>(b) / 1048576.0; };
  SCOPED_TRACE(::testing::Message()
               << "available " << mib(r.base_available) << " -> " << mib(r.now_available)
               << " MiB, unreclaimed " << mib(r.base_unreclaimed) << " -> "
               << mib(r.now_unreclaimed) << " MiB, file " << mib(r.now_file) << " MiB");
  // The cache filled the cgroup: the old figure saw most of the limit go...
  EXPECT_GT(r.pressure_unreclaimed, 0.5);
  EXPECT_GT(r.now_file, kLimit / 2);
  // ...while by the paper's figure other apps keep their memory.
  EXPECT_LT(r.pressure, 0.10);
  EXPECT_GT(r.now_available, kLimit * 9 / 10);
}

TEST(StepStats, FieldsRoundTripAndRejectBadValues) {
  StepStats s;
  s.compute_ms = 1.5;
  s.reload_bytes = 4096;
  s.major_faults = 3;
  s.pressure = 0.25;
  s.disk_bytes = 1 << 20;
  s.decode = 1;
  s.sends = 2;
  s.weight_budget_bytes = 5e6;
  s.expert_bytes = 3e6;
  const auto f = to_fields(s);
  ASSERT_EQ(f.size(), 23u);  // every StepStats field, once
  const auto back = from_fields(f);
  EXPECT_EQ(back.disk_bytes, 1 << 20);
  EXPECT_EQ(back.decode, 1.0);
  EXPECT_EQ(back.sends, 2.0);
  EXPECT_EQ(back.weight_budget_bytes, 5e6);
  EXPECT_EQ(back.compute_ms, 1.5);
  EXPECT_EQ(back.reload_bytes, 4096);
  EXPECT_EQ(back.major_faults, 3);
  EXPECT_EQ(back.pressure, 0.25);
  EXPECT_EQ(back.expert_bytes, 3e6);
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
  const MemoryStatus mem{1000, 300, "t", 300, 0};
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 250, 0, mem));
  EXPECT_TRUE(release_enabled(ReleaseMode::kAuto, 400, 0, mem));
  // Half already cached: counted once, as file pages in `available`...
  const MemoryStatus cached{1000, 500, "t", 300, 200};
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 400, 200, cached));
  EXPECT_TRUE(release_enabled(ReleaseMode::kAuto, 600, 200, cached));
  // ...or, when the file pages are unknown, as share_resident beside the unreclaimed figure.
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 400, 200, mem));
  // Other reclaimable cache in the cgroup makes room too.
  EXPECT_FALSE(release_enabled(ReleaseMode::kAuto, 400, 0, MemoryStatus{1000, 900, "t", 100, 800}));
  EXPECT_TRUE(release_enabled(ReleaseMode::kOn, 1, 0, mem));
  EXPECT_FALSE(release_enabled(ReleaseMode::kOff, 5000, 0, mem));
  EXPECT_EQ(parse_release_mode("auto"), ReleaseMode::kAuto);
  EXPECT_THROW(parse_release_mode("yes"), UsageError);
}

}  // namespace
}  // namespace hearth::residency
