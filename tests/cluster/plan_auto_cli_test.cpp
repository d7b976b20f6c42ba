// `hearth run --workers ... --plan auto` end to end: real `hearth worker` processes on
// 127.0.0.1, a small synthetic model. Workers send their profiles at set-up, the head runs
// Halda and applies its windows; greedy ids must equal the single-device run, and the
// summary carries the plan with its predicted TPOT beside the measured one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/profile_file.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"
#include "support/worker_process.h"

extern char** environ;

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_plan_auto_test");
}

std::string make_model() {
  const std::string path = (test_dir() / "m.gguf").string();
  if (fs::exists(path)) return path;
  return hearth::testing::write_model(path, {.layers = 8, .seed = 11});
}

// A device profile with `ram_gib` of memory and a 0.2 GB/s disk: small enough that the
// model (5 MiB) does not fit one device, so Halda spreads it over the ring.
std::string write_profile(const std::string& name, double ram_gib) {
  return hearth::testing::write_profile_file((test_dir() / (name + ".json")).string(), name,
                                             ram_gib);
}

// Every device and the single-device baseline run --repack off: plans with k > 1 never
// repack, k = 1 devices would, and the ids are compared bitwise (see ring_cli_test.cpp).
using WorkerProc = hearth::testing::WorkerProcess;

struct RunResult {
  int status = -1;
  std::string err;
  nlohmann::json summary;
};

RunResult run_head(const std::string& model, const std::string& extra) {
  const std::string err = (test_dir() / "head.err").string();
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " run -m " + model +
                          " -p 'the fire in the hearth' -t 1 -c 256 --temp 0 --ignore-eos --json "
                          "--repack off -n 12 " +
                          extra + " 2>" + err;
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  r.status = pclose(p);
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const auto last = out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
  try {
    r.summary = nlohmann::json::parse(last);
  } catch (const std::exception&) {
  }
  return r;
}

TEST(PlanAutoCli, HaldaPlanRunsTheRingAndMatchesOneDevice) {
  const auto model = make_model();
  const auto single = run_head(model, "");
  ASSERT_EQ(single.status, 0) << single.err;
  WorkerProc w1(
      {"-m", model, "--repack", "off", "--name", "w1", "--profile", write_profile("w1", 0.0024)});
  WorkerProc w2(
      {"-m", model, "--repack", "off", "--name", "w2", "--profile", write_profile("w2", 0.0024)});
  ASSERT_FALSE(w1.address().empty());
  ASSERT_FALSE(w2.address().empty());
  const auto ring = run_head(model, "--workers " + w1.address() + "," + w2.address() +
                                        " --plan auto --profile " + write_profile("head", 0.0024));
  ASSERT_EQ(ring.status, 0) << ring.err;
  EXPECT_EQ(ring.summary["ids"], single.summary["ids"]) << ring.err;
  const auto& plan = ring.summary["plan"];
  ASSERT_TRUE(plan.contains("predicted_tpot_ms")) << plan.dump();
  EXPECT_GT(plan["predicted_tpot_ms"].get<double>(), 0);
  EXPECT_GT(ring.summary["tpot_ms"].get<double>(), 0);
  // Memory this small (2.5 MiB per device for a 5 MiB model) forces a split: every device gets
  // layers, and the windows the ring ran are the ones Halda chose (w sums to the 8 layers,
  // k = 1).
  const auto& devs = plan["devices"];
  ASSERT_EQ(devs.size(), 3u) << plan.dump();
  int sum = 0;
  const auto& halda = plan["halda"]["devices"];
  for (size_t m = 0; m < devs.size(); ++m) {
    EXPECT_GE(devs[m]["w"].get<int>(), 1);
    EXPECT_EQ(devs[m]["w"], halda[m]["w"]) << plan.dump();
    sum += devs[m]["w"].get<int>();
  }
  EXPECT_EQ(sum, 8);
  EXPECT_EQ(plan["halda"]["links"].size(), 2u);
  EXPECT_NE(ring.err.find("predicted"), std::string::npos) << ring.err;
  EXPECT_NE(ring.err.find("measured"), std::string::npos) << ring.err;
  EXPECT_TRUE(w1.alive());
  EXPECT_TRUE(w2.alive());
}

TEST(PlanAutoCli, DroppedWorkerIdlesAndServesTheNextHead) {
  const auto model = make_model();
  const auto single = run_head(model, "");
  ASSERT_EQ(single.status, 0) << single.err;
  // One roomy worker with a fast CPU, one tiny slow one: Halda drops the slow one.
  const auto roomy = write_profile("roomy", 4.0);
  WorkerProc w1({"-m", model, "--repack", "off", "--name", "roomy", "--profile", roomy});
  const std::string slow = (test_dir() / "slow.json").string();
  {
    auto j = nlohmann::json::parse(std::ifstream(write_profile("slow", 0.006)));
    for (auto& [k, v] : j["cpu"]["gflops"].items()) v = v.get<double>() / 50;
    std::ofstream(slow) << j.dump();
  }
  WorkerProc w2({"-m", model, "--repack", "off", "--name", "slow", "--profile", slow});
  const auto ring = run_head(model, "--workers " + w1.address() + "," + w2.address() +
                                        " --plan auto --profile " + write_profile("head", 0.003));
  ASSERT_EQ(ring.status, 0) << ring.err;
  EXPECT_EQ(ring.summary["ids"], single.summary["ids"]) << ring.err;
  const auto& dropped = ring.summary["plan"]["halda"]["dropped_workers"];
  ASSERT_EQ(dropped.size(), 1u) << ring.summary["plan"].dump();
  EXPECT_EQ(dropped[0], w2.address());
  EXPECT_EQ(ring.summary["plan"]["devices"].size(), 2u);
  EXPECT_NE(ring.err.find("told to idle"), std::string::npos) << ring.err;
  // The dropped worker went back to waiting: an even ring with both workers still runs.
  const auto again = run_head(model, "--workers " + w1.address() + "," + w2.address());
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(again.summary["ids"], single.summary["ids"]);
}

TEST(PlanAutoCli, NoSelectKeepsEveryDevice) {
  const auto model = make_model();
  const auto single = run_head(model, "");
  ASSERT_EQ(single.status, 0) << single.err;
  // Roomy devices: with selection Halda would run the head alone (no hop is cheaper than
  // one); --no-select keeps both workers with at least one layer each.
  WorkerProc w1(
      {"-m", model, "--repack", "off", "--name", "a", "--profile", write_profile("a", 4.0)});
  WorkerProc w2(
      {"-m", model, "--repack", "off", "--name", "b", "--profile", write_profile("b", 4.0)});
  const std::string workers = "--workers " + w1.address() + "," + w2.address();
  const std::string head = " --plan auto --profile " + write_profile("head", 4.0);
  const auto selected = run_head(model, workers + head);
  ASSERT_EQ(selected.status, 0) << selected.err;
  EXPECT_EQ(selected.summary["plan"]["devices"].size(), 1u) << selected.err;
  const auto all = run_head(model, workers + head + " --no-select");
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(all.summary["ids"], single.summary["ids"]);
  const auto& devs = all.summary["plan"]["devices"];
  ASSERT_EQ(devs.size(), 3u) << all.err;
  for (const auto& d : devs) EXPECT_GE(d["w"].get<int>(), 1);
}

}  // namespace
}  // namespace hearth::cluster
