// The home-cluster emulation harness (bench/cluster/run.sh) on a two-device testbed and a tiny
// model: a run produces figures, and afterwards — also after SIGINT in the middle of a
// generation — none of the namespaces, cgroups or processes it created remain. Needs root and
// cgroup v1 (as on CI); skipped otherwise.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/scratch_dir.h"
#include "support/subprocess.h"

extern char** environ;

namespace hearth::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kRunSh = std::string(HEARTH_SOURCE_DIR) + "/bench/cluster/run.sh";
const std::string kTestbed = std::string(HEARTH_SOURCE_DIR) + "/bench/cluster/testbeds/tiny2.json";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

bool can_run() {
  return geteuid() == 0 && fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") &&
         fs::exists("/sys/fs/cgroup/cpu") && fs::exists("/sys/fs/cgroup/blkio");
}

class HarnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!can_run()) GTEST_SKIP() << "needs root and cgroup v1 memory/cpu/blkio";
    // An id of our own: the harness names everything after it, so the checks below see only
    // what this test created, even with other harness runs on the machine.
    id_ = std::to_string(90000 + getpid() % 9000) + std::to_string(counter_++);
    dir_ = hearth::testing::scratch_dir() / ("hearth_harness_" + id_);
    fs::create_directories(dir_);
    model_ = (dir_ / "tiny.gguf").string();
    const auto synth = run_hearth("synth --preset tiny-llama --type q4_k_m -t 1 -o " + model_);
    ASSERT_EQ(synth.exit_code, 0) << synth.all();
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string env() const {
    return "HEARTH_CLUSTER_ID=" + id_ + " HEARTH_BIN=" + HEARTH_BIN_PATH + " ";
  }
  std::vector<std::string> args(const std::string& system, int tokens) const {
    return {kRunSh,
            "--testbed",
            kTestbed,
            "--model",
            model_,
            "--system",
            system,
            "--layers",
            "4",
            "--tokens",
            std::to_string(tokens),
            "--ctx",
            std::to_string(tokens + 64),
            "--work",
            (dir_ / "work").string()};
  }

  // Everything the harness could have left: namespaces, cgroups, processes (a process is
  // ours if its command line or environment names this test's directory).
  std::vector<std::string> leftovers() const {
    std::vector<std::string> left;
    const std::string prefix = "hc" + id_;
    if (fs::exists("/run/netns")) {
      for (const auto& e : fs::directory_iterator("/run/netns")) {
        if (e.path().filename().string().rfind(prefix, 0) == 0) left.push_back(e.path());
      }
    }
    for (const char* c : {"memory", "cpu", "blkio"}) {
      const fs::path cg = fs::path("/sys/fs/cgroup") / c / ("hearth-cluster-" + id_);
      if (fs::exists(cg)) left.push_back(cg.string());
    }
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (std::stoi(name) == getpid()) continue;
      const std::string cmd = slurp(e.path() / "cmdline") + slurp(e.path() / "environ");
      if (cmd.find(dir_.string()) != std::string::npos) {
        std::string shown = slurp(e.path() / "cmdline");
        for (char& ch : shown) ch = ch == '\0' ? ' ' : ch;
        left.push_back("pid " + name + ": " + shown);
      }
    }
    return left;
  }

  static inline int counter_ = 0;
  std::string id_;
  fs::path dir_;
  std::string model_;
};

TEST_F(HarnessTest, SmokeRunMeasuresEveryDeviceAndCleansUp) {
  std::string cmd = env();
  for (const auto& a : args("ring-k2", 4)) cmd += "'" + a + "' ";
  const auto r = run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto j = last_json_line(r.out);
  EXPECT_EQ(j.at("system"), "ring-k2");
  EXPECT_GT(j.at("tpot_ms").get<double>(), 0.0);
  EXPECT_GT(j.at("ttft_ms").get<double>(), 0.0);
  EXPECT_EQ(j.at("plan").at("k"), 2);  // 4 layers, windows 1,1
  ASSERT_EQ(j.at("devices").size(), 2u);
  for (const auto& d : j.at("devices")) {
    // The cgroup limit of the testbed (256 MiB) was applied, and the device ran its layers.
    EXPECT_EQ(d.at("cg_limit_bytes").get<int64_t>(), int64_t{256} << 20) << d.dump();
    EXPECT_GT(d.at("cg_peak_bytes").get<int64_t>(), 0) << d.dump();
    EXPECT_EQ(d.at("steps").get<int>(), 4) << d.dump();
  }
  EXPECT_EQ(j.at("devices")[0].at("name"), "A");
  EXPECT_EQ(j.at("devices")[1].at("name"), "B");
  // Traffic went through the link relays (each prints its count when stopped).
  const std::string relay = slurp(dir_ / "work" / "relay0.err");
  EXPECT_NE(relay.find("bytes forwarded"), std::string::npos) << relay;
  EXPECT_EQ(relay.find(" 0 bytes forwarded"), std::string::npos) << relay;
  const auto left = leftovers();
  EXPECT_TRUE(left.empty()) << left.front();
}

// The device profile of a disk behind a blkio throttle (as the testbed's devices read): the
// sequential rate is the throttle's, and the burst that the throttle's time slices let an idle
// reader take at once is measured (the overlap cost model's disk_burst_bytes).
TEST_F(HarnessTest, TheProfilerMeasuresAThrottledDisksRateAndBurst) {
  const fs::path cg = fs::path("/sys/fs/cgroup/blkio") / ("hearth-cluster-" + id_);
  const fs::path script = dir_ / "throttled_profile.sh";
  {
    std::ofstream f(script);
    f << "set -e\n"
      << "source '" << (fs::path(kRunSh).parent_path() / "lib.sh").string() << "'\n"
      << "cg='" << cg.string() << "' model='" << model_ << "' bin='" << HEARTH_BIN_PATH << "'\n"
      << "mkdir \"$cg\"\n"
      << "echo \"$(hc_block_device \"$model\") 50000000\" > "
         "\"$cg/blkio.throttle.read_bps_device\"\n"
      << "rc=0\n"
      << "bash -c 'echo $$ > \"$0/cgroup.procs\"; exec \"$1\" profile -m \"$2\" -t 1 --no-cache "
         "--json' \"$cg\" \"$bin\" \"$model\" || rc=$?\n"
      << "rmdir \"$cg\"\n"
      << "exit $rc\n";
  }
  const auto r = run_command("bash '" + script.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto j = last_json_line(r.out);
  const double gbps = j.at("disk_seq_read_gbps").get<double>();
  // Within 0.6-1.3x of the set 50 MB/s: the probe shares two cores with the tests running
  // beside it, which slows it below the set rate; a profiler that missed the throttle reads GB/s.
  EXPECT_GT(gbps, 0.03) << j.dump();
  EXPECT_LT(gbps, 0.065) << j.dump();
  // The throttle accounts in 100 ms slices: about 5 MB at once after an idle gap.
  EXPECT_GT(j.at("disk_burst_mib").get<double>(), 1.0) << j.dump();
  // ...read faster than the throttle's rate.
  EXPECT_GT(j.at("disk_peak_read_gbps").get<double>(), gbps) << j.dump();
  EXPECT_FALSE(fs::exists(cg));
}

TEST_F(HarnessTest, InterruptedRunCleansUp) {
  const auto a = args("pipeline", 20000);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>("/bin/bash"));
  for (const auto& s : a) argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> envs = {"HEARTH_CLUSTER_ID=" + id_,
                                   std::string("HEARTH_BIN=") + HEARTH_BIN_PATH};
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);

  // A script cannot trap a signal ignored when it started: start it with SIGINT at default.
  const std::string err_path = (dir_ / "run.err").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGINT);
  sigaddset(&def, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &def);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, "/bin/bash", &fa, &attr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);

  // Interrupt mid-generation: once the cluster is up and the head has produced tokens.
  bool up = false;
  for (int i = 0; i < 600 && !up; ++i) {
    std::this_thread::sleep_for(100ms);
    up = slurp(err_path).find("cluster up") != std::string::npos;
  }
  std::this_thread::sleep_for(1500ms);
  // Meaningful only if there was something to leak at this point.
  const auto during = leftovers();
  EXPECT_TRUE(up) << slurp(err_path);
  EXPECT_GE(during.size(), 3u) << "expected namespaces, cgroups and processes mid-run";
  ASSERT_EQ(kill(pid, SIGINT), 0);

  int status = 0;
  bool exited = false;
  for (int i = 0; i < 300 && !exited; ++i) {
    exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(100ms);
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  ASSERT_TRUE(exited) << "run.sh did not stop within 30 s of SIGINT";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << slurp(err_path);
  const auto left = leftovers();
  EXPECT_TRUE(left.empty()) << left.front();
}

TEST_F(HarnessTest, RefusesWithoutRoot) {
  // As the nobody user: a clear message and exit 2, before anything is created. The scripts
  // are copied to a directory nobody can read: a checkout under a 0700 directory (mktemp -d)
  // would otherwise fail with "permission denied" before the script could say anything.
  const fs::path copy = hearth::testing::scratch_dir() / ("hearth_harness_nobody_" + id_);
  fs::create_directories(copy);
  for (const char* f : {"run.sh", "lib.sh"}) {
    fs::copy_file(fs::path(kRunSh).parent_path() / f, copy / f,
                  fs::copy_options::overwrite_existing);
  }
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  for (const char* f : {"run.sh", "lib.sh"}) {
    fs::permissions(copy / f, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  }
  std::string cmd = "setpriv --reuid=65534 --regid=65534 --clear-groups env " + env();
  auto a = args("pipeline", 4);
  a[0] = (copy / "run.sh").string();
  for (const auto& x : a) cmd += "'" + x + "' ";
  const auto r = run_command(cmd);
  std::error_code ec;
  fs::remove_all(copy, ec);
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.err.find("must run as root"), std::string::npos) << r.err;
  const auto left = leftovers();
  EXPECT_TRUE(left.empty()) << left.front();
}

}  // namespace
}  // namespace hearth::testing
