// `hearth bench plan`: Halda's solve time for rings of 4-32 devices at L = 80 (the paper
// reports 10-12 ms with HiGHS), and the plans with predicted TPOT and Halda's solve time for
// Llama-3-70B on the paper testbeds, next to MemSched and PerfSched through the same cost
// model; under each cost model (overlap and paper, or the one --cost-model names).
#include <fmt/core.h>

#include <algorithm>
#include <thread>

#include "bench_registry.h"
#include "hearth/plan/baselines.h"
#include "hearth/plan/halda.h"
#include "hearth/profile/model_profile.h"

namespace hearth::cli {
namespace {

std::string split_text(const plan::Plan& p) {
  if (p.W == 0) return "-";
  std::string s;
  for (const auto& d : p.devices) {
    if (d.dropped) continue;
    s += fmt::format("{}{}:{}/{}{}", s.empty() ? "" : " ", d.name, d.w, d.n,
                     d.relay ? "(relay)" : "");
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_bench_plan(const Args& args) {
  CLI::App app{"Halda solve time and testbed plans", "bench plan"};
  std::string testbeds = "bench/testbeds";  // relative to the source tree, where benches run
  int reps = 5;
  std::string which = "both";
  app.add_option("--testbeds", testbeds,
                 "directory with the paper-*.json testbeds (default: run from the source tree)");
  app.add_option("--reps", reps, "solves per ring size and testbed (median reported)");
  app.add_option("--cost-model", which, "overlap | paper | both")
      ->check(CLI::IsMember({"overlap", "paper", "both"}));
  if (auto code = parse(app, args)) return *code;
  std::vector<plan::CostModel> models;
  if (which != "paper") models.push_back(plan::CostModel::kOverlap);
  if (which != "overlap") models.push_back(plan::CostModel::kPaper);

  fmt::print("machine: {} hardware threads; solver COIN-OR CBC (the paper uses HiGHS)\n",
             std::thread::hardware_concurrency());
  const auto model = profile::profile_preset("llama3-70b", 1.0, "q4_k_m");
  fmt::print("model: {} ({:.1f} GiB of weights, L = {})\n\n", model.name,
             model.total_weight_bytes() / (1024.0 * 1024 * 1024), model.n_layers);

  for (plan::CostModel cm : models) {
    // Rings of 4-32 devices: Table 11's ten devices, repeated with new names.
    const auto base = profile::load_devices_file(testbeds + "/paper-table11.json").devices;
    fmt::print("== cost model {} ==\n", plan::cost_model_name(cm));
    fmt::print("solve time, L = 80, Table 11 devices repeated ({} runs, median)\n", reps);
    fmt::print("{:>8} {:>14} {:>8} {:>6} {:>16} {:>8} {:>6} {:>12}\n", "devices", "halda_ms",
               "ilps", "iters", "algorithm1_ms", "ilps", "iters", "tpot_ms");
    for (size_t M : {4, 8, 16, 32}) {
      plan::Problem p;
      p.model = model;
      p.options.model = cm;
      for (size_t i = 0; i < M; ++i) {
        auto d = base[i % base.size()];
        if (i >= base.size()) d.name += "." + std::to_string(i / base.size());
        d.head = i == 0;
        p.devices.push_back(d);
      }
      plan::HaldaOptions alg1;
      alg1.refine = false;
      alg1.select_devices = false;
      std::vector<double> full_ms, alg1_ms;
      plan::Plan full, only;
      for (int r = 0; r < reps; ++r) {
        full = plan::halda(p);
        only = plan::halda(p, alg1);
        full_ms.push_back(full.solve_ms);
        alg1_ms.push_back(only.solve_ms);
      }
      fmt::print("{:>8} {:>14.1f} {:>8} {:>6} {:>16.1f} {:>8} {:>6} {:>12.1f}\n", M,
                 median(full_ms), full.ilps, full.iterations, median(alg1_ms), only.ilps,
                 only.iterations, full.predicted_tpot_ms);
    }
    fmt::print(
        "(halda = {} + device selection; algorithm1 = the paper's loop alone on all devices{})\n\n",
        cm == plan::CostModel::kPaper ? "Algorithm 1 + exact set refinement" : "one MILP per k",
        cm == plan::CostModel::kPaper ? "" : ", the same MILP here");

    fmt::print("Llama-3-70B Q4_K_M plans, predicted TPOT (ms), ctx 4096; split = device:w/n\n");
    for (const char* file : {"paper-table3-d1-d4.json", "paper-table3.json", "paper-table11.json",
                             "paper-a4.json", "paper-a10.json", "paper-a14.json"}) {
      plan::Problem p;
      p.model = model;
      p.options.model = cm;
      p.devices = profile::load_devices_file(testbeds + "/" + file).devices;
      std::vector<double> solve_ms;
      plan::Plan h;
      for (int r = 0; r < reps; ++r) {
        h = plan::halda(p);
        solve_ms.push_back(h.solve_ms);
      }
      fmt::print("{}: halda solved in {:.1f} ms (median of {})\n", file, median(solve_ms), reps);
      for (const auto& pl : {h, plan::memsched(p), plan::perfsched(p)}) {
        fmt::print("  {:<10} tpot {:>9.1f}  k={:<2} {}{}\n", pl.scheduler, pl.predicted_tpot_ms,
                   pl.k, split_text(pl), pl.feasible ? "" : "  [infeasible: " + pl.reason + "]");
      }
    }
    fmt::print("\n");
  }
  return 0;
}

HEARTH_BENCH("plan", "Halda solve time (4-32 devices) and testbed plans vs MemSched/PerfSched",
             run_bench_plan);

}  // namespace
}  // namespace hearth::cli
