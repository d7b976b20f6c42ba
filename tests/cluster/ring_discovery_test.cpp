// `--workers auto` (issue 17, docs/ring.md "Finding devices"): real `hearth worker --announce`
// processes on this host announce over UDP multicast; the head finds those holding its model
// and cluster key and forms the ring with them, with no address typed. Each test process uses
// a port of its own, so concurrent tests do not hear each other.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/synth_model.h"
#include "support/worker_process.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_discovery");
}

const std::string& model_path() {
  static const std::string path =
      hearth::testing::write_model((test_dir() / "m.gguf").string(), {6, 256, 4, 2, 512, 512});
  return path;
}

std::string discovery() {
  return "239.255.72.72:" + std::to_string(40000 + ::getpid() % 20000);
}

const std::string kGen =
    " -p 'the fire in the hearth' -n 16 -t 1 -c 256 --temp 0 --ignore-eos "
    "--json --repack off";

// An announcing worker; `listen` with 0.0.0.0 makes the head use the datagram's sender.
hearth::testing::WorkerProcess announcing(const std::string& name, const std::string& listen,
                                          const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"-m", model_path(), "--repack",    "off",      "--name",
                                   name, "--announce", "--discovery", discovery()};
  args.insert(args.end(), extra.begin(), extra.end());
  return hearth::testing::WorkerProcess(args, listen);
}

TEST(RingDiscovery, HeadFindsAnnouncingWorkersAndMatchesOneDevice) {
  const auto single = hearth::testing::run_hearth("run -m " + model_path() + kGen);
  ASSERT_EQ(single.exit_code, 0) << single.err;
  auto w1 = announcing("den", "tcp://127.0.0.1:0");
  auto w2 = announcing("attic", "tcp://0.0.0.0:0");
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  const auto ring =
      hearth::testing::run_hearth("run -m " + model_path() + kGen +
                                  " --workers auto --discover-time 2 --discovery " + discovery());
  ASSERT_EQ(ring.exit_code, 0) << ring.err << w1.log() << w2.log();
  const auto s = hearth::testing::last_json_line(ring.out);
  EXPECT_EQ(s["ids"], hearth::testing::last_json_line(single.out)["ids"]);
  ASSERT_EQ(s["devices"].size(), 3u) << ring.err;
  std::vector<std::string> names;
  for (const auto& d : s["devices"]) names.push_back(d["name"]);
  EXPECT_NE(std::find(names.begin(), names.end(), "den"), names.end()) << ring.err;
  EXPECT_NE(std::find(names.begin(), names.end(), "attic"), names.end()) << ring.err;
  EXPECT_NE(ring.err.find("found"), std::string::npos) << ring.err;
}

TEST(RingDiscovery, NoWorkerOfThisModelAndKeyIsAUsageError) {
  // One worker announces with another cluster key: the head hears it and ignores it.
  const std::string other_key = (test_dir() / "other.key").string();
  ASSERT_EQ(hearth::testing::run_hearth("keygen --force " + other_key).exit_code, 0);
  auto stranger = announcing("stranger", "tcp://127.0.0.1:0", {"--key-file", other_key});
  ASSERT_FALSE(stranger.address().empty()) << stranger.log();
  const auto r =
      hearth::testing::run_hearth("run -m " + model_path() + kGen +
                                  " --workers auto --discover-time 1.5 --discovery " + discovery());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no idle worker holding"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hearth worker --announce"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("(0 other announcements ignored"), std::string::npos) << r.err;
  EXPECT_TRUE(stranger.alive());
  // A manual plan cannot be given without naming the workers.
  const auto bad =
      hearth::testing::run_hearth("run -m " + model_path() + kGen + " --workers auto --plan 2,2,2");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--workers auto takes --plan even or auto"), std::string::npos) << bad.err;
  const auto bad_group = hearth::testing::run_hearth("run -m " + model_path() + kGen +
                                                     " --workers auto --discovery lan:5");
  EXPECT_EQ(bad_group.exit_code, 2) << bad_group.err;
}

}  // namespace
}  // namespace hearth::cluster
