// The residency planner on a real file larger than a real memory limit (cgroup v1, as the
// emulated home cluster uses): `hearth run` in a cgroup whose limit is below the model keeps
// part of the weights resident and streams the rest, reading per decoded token about the
// excess (assigned bytes minus its weight budget), where plain mmap re-reads much more; the
// greedy ids are those of an unconstrained run. Streaming through the page cache reads the same
// bytes and leaves the streamed part reclaimable.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/synth_model.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;
using testing::last_json_line;
using testing::run_command;

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A memory cgroup of its own, removed on destruction.
class MemoryCgroup {
 public:
  explicit MemoryCgroup(uint64_t limit) {
    const fs::path root = "/sys/fs/cgroup/memory";
    if (::access(root.c_str(), W_OK) != 0) return;
    dir_ = root / ("hearth-stream-test-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::create_directory(dir_, ec);
    if (ec) {
      dir_.clear();
      return;
    }
    std::ofstream(dir_ / "memory.limit_in_bytes") << limit;
  }
  ~MemoryCgroup() {
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  bool ok() const { return !dir_.empty(); }
  // A shell command that runs `cmd` inside the cgroup.
  std::string wrap(const std::string& cmd) const {
    return "sh -c 'echo $$ > " + (dir_ / "cgroup.procs").string() + " && exec " + cmd + "'";
  }

 private:
  fs::path dir_;
};

TEST(StreamInCgroup, ReadsAboutTheExcessPerTokenWherePlainMmapRereadsMore) {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_stream_cg_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // 12 layers of 7 MiB in Q4_K: 83 MiB, above the 64 MiB limit below.
  const std::string model =
      testing::write_model((dir / "big.gguf").string(), {12, 1024, 8, 8, 2816, 512, "q4_k", 3});
  const uint64_t model_bytes = fs::file_size(model);
  ASSERT_GT(model_bytes, 80 * kMiB);
  MemoryCgroup cg(64 * kMiB);
  if (!cg.ok()) GTEST_SKIP() << "no writable cgroup v1 memory controller (needs root)";

  const std::string args = " run -m " + model +
                           " -p fire -n 6 -t 1 -c 64 --temp 0 --ignore-eos --json "
                           "--repack off";
  const auto ref = run_command(std::string(HEARTH_BIN_PATH) + args + " --residency mmap");
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const auto ref_ids = last_json_line(ref.out)["ids"];

  auto in_cgroup = [&](const std::string& mode) {
    // Nothing of the file may be in the page cache before the run: its first reader would be
    // charged elsewhere and the cgroup would not have to evict it.
    const int fd = ::open(model.c_str(), O_RDONLY);
    if (fd >= 0) {
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    const auto r =
        run_command(cg.wrap(std::string(HEARTH_BIN_PATH) + args + " --residency " + mode));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return last_json_line(r.out);
  };
  const auto stream = in_cgroup("stream");
  ASSERT_TRUE(stream.contains("devices")) << stream.dump();
  EXPECT_EQ(stream["ids"], ref_ids);
  const auto& d = stream["devices"][0];
  const double assigned = d["assigned_bytes"].get<double>();
  const double budget = d["weight_budget_bytes"].get<double>();
  const double excess = assigned - budget;
  ASSERT_GT(excess, 10.0 * kMiB) << d.dump();  // the limit really is below the model
  const double disk = d["disk_bytes_per_token"].get<double>();
  const double streamed = d["stream_bytes_per_token"].get<double>();
  EXPECT_LE(disk, 1.15 * excess + 4.0 * kMiB) << d.dump();
  EXPECT_GE(streamed, 0.9 * excess) << d.dump();

  // Through the page cache: the same ids and bytes, and the streamed part no longer counts as
  // memory taken from the device (the paper's pressure), where the anonymous buffer does.
  const auto cache = in_cgroup("stream --stream-io cache");
  EXPECT_EQ(cache["ids"], ref_ids);
  const auto& dc = cache["devices"][0];
  EXPECT_LE(dc["disk_bytes_per_token"].get<double>(), 1.15 * excess + 4.0 * kMiB) << dc.dump();
  EXPECT_GE(dc["stream_bytes_per_token"].get<double>(), 0.9 * excess) << dc.dump();
  const double buffer = d["stream_buffer_bytes"].get<double>();
  ASSERT_GT(buffer, 2.0 * kMiB) << d.dump();
  // Pressure is over the cgroup limit: the buffer alone is buffer / limit of it.
  EXPECT_LT(dc["pressure_max"].get<double>() + 0.5 * buffer / (64.0 * kMiB),
            d["pressure_max"].get<double>())
      << "cache " << dc.dump() << "\ndirect " << d.dump();

  const auto mmap = in_cgroup("mmap");
  EXPECT_EQ(mmap["ids"], ref_ids);
  const double disk_mmap = mmap["devices"][0]["disk_bytes_per_token"].get<double>();
  EXPECT_GT(disk_mmap, disk) << "plain mmap in the same limit read " << disk_mmap / kMiB
                             << " MiB per token, streaming " << disk / kMiB;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace hearth::cluster
