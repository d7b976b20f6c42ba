// `hearth plan` end to end: the real binary on the paper testbeds and on bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include "support/scratch_dir.h"

namespace {

struct Run {
  int code = -1;
  std::string out;
};

Run run(const std::string& args) {
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " plan " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

nlohmann::json last_line_json(const std::string& out) {
  auto end = out.find_last_not_of('\n');
  auto start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1, end - start));
}

const std::string kTestbeds = std::string(HEARTH_SOURCE_DIR) + "/bench/testbeds/";

TEST(CliPlan, JsonPlanOnTable3) {
  for (const char* sched : {"halda", "memsched", "perfsched"}) {
    const auto r = run("--preset llama3-70b --devices " + kTestbeds +
                       "paper-table3.json --json --scheduler " + sched);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("predicted TPOT"), std::string::npos) << r.out;
    const auto j = last_line_json(r.out);
    EXPECT_EQ(j["schema"], 2);
    EXPECT_EQ(j["scheduler"], sched);
    EXPECT_EQ(j["cost_model"], "overlap");
    ASSERT_TRUE(j["devices"].is_array());
    EXPECT_EQ(j["devices"].size(), 6u);
    uint32_t W = 0;
    for (const auto& d : j["devices"]) {
      EXPECT_TRUE(d.contains("name") && d.contains("w") && d.contains("n"));
      EXPECT_LE(d["n"].get<uint32_t>(), d["w"].get<uint32_t>());
      W += d["w"].get<uint32_t>();
      if (d.contains("dropped")) continue;
      for (const char* key : {"exposed_ms", "assigned_bytes", "weight_budget_bytes", "stream_bytes",
                              "stream_buffer_bytes"}) {
        EXPECT_TRUE(d.contains(key)) << key;
      }
      EXPECT_LE(d["exposed_ms"].get<double>(), d["disk_ms"].get<double>() + 1e-9);
    }
    EXPECT_EQ(W * j["k"].get<uint32_t>(), 80u) << sched;
    EXPECT_GT(j["predicted_tpot_ms"].get<double>(), 0);
    EXPECT_GE(j["solve_ms"].get<double>(), 0);
  }
}

// The KV cache types enter the memory terms: at a 32K context the 70B's f16 cache takes
// 10 GiB of the testbed's memory, and smaller types leave more of it to the weights, so the
// predicted TPOT falls with them. A bad type is a usage error naming the flag.
TEST(CliPlan, KvCacheTypesFreeMemoryForWeights) {
  double last = 1e300;
  for (const char* t : {"f16", "q8_0", "q4_0"}) {
    const auto r = run("--preset llama3-70b --devices " + kTestbeds +
                       "paper-table3.json -c 32768 --json -ctk " + t + " --cache-type-v " + t);
    ASSERT_EQ(r.code, 0) << r.out;
    const double tpot = last_line_json(r.out)["predicted_tpot_ms"].get<double>();
    EXPECT_LT(tpot, last) << t;
    last = tpot;
  }
  const auto bad = run("--preset llama3-70b --devices " + kTestbeds + "paper-table3.json -ctk q9");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--cache-type-k"), std::string::npos) << bad.out;
}

// --solver ilp (the MILP with CBC) reaches the plan cost of the default knapsack search on
// the overlap model; an unknown solver is a usage error.
TEST(CliPlan, SolverIlpAgreesWithTheSearch) {
  const std::string base = "--preset llama3-70b --devices " + kTestbeds + "paper-a4.json --json";
  const auto s = run(base);
  const auto i = run(base + " --solver ilp");
  ASSERT_EQ(s.code, 0) << s.out;
  ASSERT_EQ(i.code, 0) << i.out;
  const auto js = last_line_json(s.out), ji = last_line_json(i.out);
  EXPECT_NEAR(js["predicted_tpot_ms"].get<double>(), ji["predicted_tpot_ms"].get<double>(),
              1e-6 * js["predicted_tpot_ms"].get<double>());
  EXPECT_GT(js["knapsacks"].get<int>(), 0);
  EXPECT_GT(ji["ilps"].get<int>(), 0);
  EXPECT_EQ(run(base + " --solver magic").code, 2);
}

TEST(CliPlan, CostModelPaperSumsEveryTermAndOverlapHidesReads) {
  const auto devices = " --json --preset llama3-70b --devices " + kTestbeds + "paper-table3.json";
  const auto paper = run("--cost-model paper" + devices);
  const auto overlap = run("--cost-model overlap" + devices);
  ASSERT_EQ(paper.code, 0) << paper.out;
  ASSERT_EQ(overlap.code, 0) << overlap.out;
  EXPECT_NE(paper.out.find("cost model paper"), std::string::npos) << paper.out;
  const auto p = last_line_json(paper.out), o = last_line_json(overlap.out);
  EXPECT_EQ(p["cost_model"], "paper");
  EXPECT_EQ(o["cost_model"], "overlap");
  for (const auto* j : {&p, &o}) {
    double sum = 0;
    for (const auto& d : (*j)["devices"]) {
      if (d.contains("dropped")) continue;
      sum += d["compute_ms"].get<double>() + d["memory_ms"].get<double>() +
             d["exposed_ms"].get<double>() + d["comm_ms"].get<double>();
      if ((*j)["cost_model"] == "paper") {
        EXPECT_EQ(d["exposed_ms"], d["disk_ms"]);
      }
    }
    EXPECT_NEAR(sum, (*j)["predicted_tpot_ms"].get<double>(), 1e-6 * sum);
  }
  EXPECT_EQ(run("--cost-model magic" + devices).code, 2);

  // --rounds 1: Halda's best plan with one round, never better than the k it picks itself.
  const auto one = run("--rounds 1" + devices);
  ASSERT_EQ(one.code, 0) << one.out;
  const auto k1 = last_line_json(one.out);
  EXPECT_EQ(k1["k"], 1);
  EXPECT_GE(k1["predicted_tpot_ms"].get<double>(),
            o["predicted_tpot_ms"].get<double>() * (1 - 1e-9));
  const auto bad = run("--rounds 0" + devices);
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--rounds"), std::string::npos) << bad.out;
  // 80 layers: 7 rounds do not divide them; no plan (exit 1) and the reason names k.
  const auto seven = run("--rounds 7" + devices);
  EXPECT_EQ(seven.code, 1) << seven.out;
  EXPECT_NE(seven.out.find("k = 7"), std::string::npos) << seven.out;
}

TEST(CliPlan, GgufFileAndPresetGiveTheSamePlan) {
  const auto path = (hearth::testing::scratch_dir() / "hearth_cli_plan_tiny.gguf").string();
  const std::string synth = std::string(HEARTH_BIN_PATH) +
                            " synth --preset tiny-llama --type q4_k_m -o " + path +
                            " > /dev/null 2>&1";
  ASSERT_EQ(std::system(synth.c_str()), 0);
  const auto devices = " --json --devices " + kTestbeds + "paper-a14.json";
  const auto from_file = run("-m " + path + devices);
  const auto from_preset = run("--preset tiny-llama --type q4_k_m" + devices);
  ASSERT_EQ(from_file.code, 0) << from_file.out;
  ASSERT_EQ(from_preset.code, 0) << from_preset.out;
  const auto a = last_line_json(from_file.out), b = last_line_json(from_preset.out);
  EXPECT_NEAR(a["predicted_tpot_ms"].get<double>(), b["predicted_tpot_ms"].get<double>(),
              1e-6 * b["predicted_tpot_ms"].get<double>());
  EXPECT_EQ(a["devices"].dump(), b["devices"].dump());
  std::filesystem::remove(path);
}

// A mixture of experts: the default search plans it and reports each device's expert reads;
// the MILP, which cannot express them, refuses it with exit 2 and says why.
TEST(CliPlan, MixturesOfExpertsPlanWithTheSearchOnly) {
  const auto devices = " --json --devices " + kTestbeds + "paper-table3.json";
  const auto ok = run("--preset qwen3-235b-a22b" + devices);
  ASSERT_EQ(ok.code, 0) << ok.out;
  const auto j = last_line_json(ok.out);
  double reads = 0;
  for (const auto& d : j["devices"]) reads += d.value("expert_read_bytes", 0.0);
  EXPECT_GT(reads, 0) << "the 235B mixture does not fit Table 3's memory: experts are read";
  const auto ilp = run("--preset qwen3-235b-a22b --solver ilp" + devices);
  EXPECT_EQ(ilp.code, 2) << ilp.out;
  EXPECT_NE(ilp.out.find("mixture of experts"), std::string::npos) << ilp.out;
}

TEST(CliPlan, BadInputFailsWithAClearMessage) {
  const auto dir = hearth::testing::scratch_dir() / "hearth_cli_plan_test";
  std::filesystem::create_directories(dir);
  auto write = [&](const char* name, const char* text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto r =
      run("--preset llama3-8b --devices " + write("zero.json", R"({"schema": 1, "devices": []})"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("at least one device"), std::string::npos) << r.out;

  r = run(
      "--preset llama3-8b --devices " +
      write(
          "neg.json",
          R"({"schema": 1, "devices": [{"name": "a", "os": "linux", "ram_available_gib": -2}]})"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("ram_available_gib"), std::string::npos) << r.out;

  r = run("--preset llama3-8b --devices " + (dir / "absent.json").string());
  EXPECT_EQ(r.code, 1);

  r = run("--preset no-such-model --devices " + kTestbeds + "paper-a4.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("unknown preset"), std::string::npos) << r.out;

  r = run("--preset llama3-8b --scheduler random --devices " + kTestbeds + "paper-a4.json");
  EXPECT_EQ(r.code, 2);

  // One CPU-only device with a slow disk and 1 GiB: a 70B model has no feasible plan.
  r = run("--preset llama3-70b --json --devices " +
          write("tiny.json",
                R"({"schema": 1, "devices": [{"name": "pi", "os": "linux", "ram_available_gib": 1,
            "disk_seq_read_gbps": 0.02, "cpu": {"gflops": {"q4_k": 10, "q6_k": 10, "f16": 10, "f32": 10},
            "mem_read_gbps": 4}, "link": {"rtt_ms": 5, "bandwidth_mbps": 100}}]})"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("no feasible plan"), std::string::npos) << r.out;
  EXPECT_EQ(last_line_json(r.out)["feasible"], false);
  std::filesystem::remove_all(dir);
}

}  // namespace
