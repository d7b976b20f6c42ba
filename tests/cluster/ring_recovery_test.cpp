// A ring that loses a worker mid-generation (issue 17): `hearth run` at the head of a
// 3-process ring on loopback, one worker killed (SIGKILL) or frozen (SIGSTOP) while tokens
// stream; the head re-forms the ring without it, rebuilds the KV caches by evaluating the
// tokens so far again, and finishes with the greedy ids of an undisturbed run (every device
// on the GGUF layout, --repack off, so any plan gives the same logits bitwise).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hearth/base/error.h"
#include "hearth/cluster/recovering_ring.h"
#include "support/profile_file.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/synth_model.h"
#include "support/worker_process.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

// Big enough that 160 tokens take a good fraction of a second on one thread, so the loss
// lands mid-generation: it is injected when the first generated text reaches stdout.
const std::string& model_path() {
  static const std::string path = [] {
    const auto p =
        hearth::testing::scratch_dir() / ("hearth_recovery_" + std::to_string(::getpid()));
    fs::create_directories(p);
    return hearth::testing::write_model((p / "m.gguf").string(),
                                        {8, 512, 8, 4, 1536, 2048, "q8_0", 11});
  }();
  return path;
}

const std::string kGen =
    " -p 'the fire in the hearth' -n 160 -t 1 -c 512 --temp 0 --ignore-eos --json --repack off";

std::vector<int> baseline_ids() {
  const auto r = hearth::testing::run_hearth("run -m " + model_path() + kGen);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return hearth::testing::last_json_line(r.out)["ids"].get<std::vector<int>>();
}

struct Disturbed {
  int status = -1;
  nlohmann::json summary;
  std::string err;
};

// Runs the head over `workers` with `plan`, and calls `disturb` once the first generated
// bytes arrive on its stdout.
template <typename F>
Disturbed run_disturbed(const std::string& workers, const std::string& plan, F disturb) {
  const std::string err = (hearth::testing::scratch_dir() /
                           ("hearth_recovery_head_" + std::to_string(::getpid()) + ".err"))
                              .string();
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " run -m " + model_path() + kGen +
                          " --workers " + workers + " --plan " + plan + " 2>" + err;
  Disturbed d;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return d;
  std::string out;
  char buf[256];
  bool disturbed = false;
  size_t n;
  while ((n = fread(buf, 1, disturbed ? sizeof buf : 1, p)) > 0) {
    out.append(buf, n);
    if (!disturbed && out.size() >= 4) {
      disturb();
      disturbed = true;
    }
  }
  d.status = pclose(p);
  d.err = hearth::testing::run_command("cat " + err).out;
  fs::remove(err);
  if (d.status == 0) d.summary = hearth::testing::last_json_line(out);
  return d;
}

// Two workers on the test model, every device on the GGUF layout.
struct TwoWorkers {
  hearth::testing::WorkerProcess w1{{"-m", model_path(), "--repack", "off"}};
  hearth::testing::WorkerProcess w2{{"-m", model_path(), "--repack", "off"}};
  bool started() const { return !w1.address().empty() && !w2.address().empty(); }
  std::string addresses() const { return w1.address() + "," + w2.address(); }
};

void expect_recovered(const Disturbed& d, const std::vector<int>& ids, const std::string& lost,
                      int devices_left) {
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_EQ(d.summary["ids"].get<std::vector<int>>(), ids);
  const auto& recs = d.summary["recoveries"];
  ASSERT_EQ(recs.size(), 1u) << d.summary.dump() << d.err;
  EXPECT_EQ(recs[0]["lost"], nlohmann::json::array({lost}));
  EXPECT_EQ(recs[0]["devices_left"].get<int>(), devices_left);
  EXPECT_GT(recs[0]["replayed_tokens"].get<int>(), 0);
  EXPECT_EQ(d.summary["devices"].size(), static_cast<size_t>(devices_left));
  EXPECT_NE(d.err.find("recovered on"), std::string::npos) << d.err;
}

TEST(RingRecovery, KilledWorkerIsLeftOutAndTheIdsStayTheSame) {
  const auto ids = baseline_ids();
  ASSERT_EQ(ids.size(), 160u);
  // k = 1 (W = 8) and k = 2 (W = 4); the second worker is lost each time.
  for (const std::string plan : {"2,3,3", "1,2,1"}) {
    SCOPED_TRACE(plan);
    TwoWorkers w;
    ASSERT_TRUE(w.started()) << w.w1.log() << w.w2.log();
    const auto d = run_disturbed(w.addresses(), plan, [&] { w.w2.kill_with(SIGKILL); });
    expect_recovered(d, ids, w.w2.address(), 2);
    EXPECT_TRUE(w.w1.alive());
  }
}

TEST(RingRecovery, FrozenWorkerIsLeftOutAfterTheHeartbeatTimeout) {
  const auto ids = baseline_ids();
  for (const std::string plan : {"2,3,3", "1,2,1"}) {  // k = 1 and k = 2; the first worker
    SCOPED_TRACE(plan);
    TwoWorkers w;
    ASSERT_TRUE(w.started()) << w.w1.log() << w.w2.log();
    const auto d = run_disturbed(w.addresses(), plan, [&] { w.w1.signal(SIGSTOP); });
    w.w1.kill_with(SIGKILL);  // a stopped process would never act on SIGTERM
    expect_recovered(d, ids, w.w1.address(), 2);
  }
}

// Under --plan auto the head runs Halda again over the devices left, on the profiles it
// gathered at start (no worker is asked again).
TEST(RingRecovery, HaldaPlansAgainOverTheDevicesLeft) {
  const auto ids = baseline_ids();
  const auto dir = fs::path(model_path()).parent_path();
  // Memory small enough (12 MiB each for a 14 MiB model) that Halda uses every device.
  auto profile = [&](const std::string& name) {
    return hearth::testing::write_profile_file((dir / (name + ".json")).string(), name, 0.012);
  };
  hearth::testing::WorkerProcess w1(
      {"-m", model_path(), "--repack", "off", "--name", "w1", "--profile", profile("w1")});
  hearth::testing::WorkerProcess w2(
      {"-m", model_path(), "--repack", "off", "--name", "w2", "--profile", profile("w2")});
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  const auto d = run_disturbed(w1.address() + "," + w2.address(),
                               "auto --profile " + profile("head"), [&] { w2.kill_with(SIGKILL); });
  EXPECT_NE(d.err.find("ring of 3 devices"), std::string::npos) << d.err;
  expect_recovered(d, ids, w2.address(), 2);
  EXPECT_NE(d.err.find("Halda re-plan over 2 devices"), std::string::npos) << d.err;
  const auto& rec = d.summary["recoveries"][0];
  const auto plan = rec["plan"].get<std::vector<int>>();
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_GE(rec["replan_ms"].get<double>(), 0);
  EXPECT_GE(plan[0], 0);
  EXPECT_GE(plan[1], 1);  // the worker left holds layers: memory is too small for the head alone
}

TEST(RingRecovery, PlanWithoutGivesTheLostLayersToTheOthersInProportion) {
  EXPECT_EQ(plan_without({10, 11, 11}, {1}), (std::vector<int>{15, 17}));
  EXPECT_EQ(plan_without({0, 2, 2}, {0}), (std::vector<int>{0, 4}));
  EXPECT_EQ(plan_without({1, 2, 1}, {1}), (std::vector<int>{1, 3}));
  EXPECT_EQ(plan_without({4, 2, 2}, {0, 1}), (std::vector<int>{8}));
  EXPECT_EQ(plan_without({0, 4}, {0}), (std::vector<int>{4}));  // the head alone takes all
  EXPECT_TRUE(plan_without({}, {0}).empty());                   // even split stays even
  for (const auto& [plan, lost] : std::vector<std::pair<std::vector<int>, std::vector<size_t>>>{
           {{3, 5, 7, 2}, {0}}, {{1, 1, 1, 1, 1}, {1, 3}}, {{6, 0, 9}, {1}}}) {
    const auto out = plan_without(plan, lost);
    int before = 0, after = 0;
    for (int w : plan) before += w;
    for (int w : out) after += w;
    EXPECT_EQ(after, before);  // W, hence the rounds, stays
    EXPECT_EQ(out.size(), plan.size() - lost.size());
  }
  EXPECT_THROW(plan_without({1, 1}, {1}), UsageError);
}

}  // namespace
}  // namespace hearth::cluster
