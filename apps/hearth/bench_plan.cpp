// `hearth bench plan`: Halda's solve time on generated fleets of 4-64 devices at L = 80 (the
// paper reports 10-12 ms with HiGHS), whether more devices ever predict a slower token, and
// the plans with predicted TPOT and Halda's solve time for Llama-3-70B on the paper testbeds,
// next to MemSched and PerfSched through the same cost model; under each cost model (overlap
// and paper, or the one --cost-model names). Exit status 1 when more devices predicted worse.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_registry.h"
#include "bench_stats.h"
#include "hearth/base/error.h"
#include "hearth/plan/baselines.h"
#include "hearth/plan/fleet.h"
#include "hearth/plan/halda.h"
#include "hearth/profiler/model_profiler.h"

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

// Halda on generated fleets (the paper's Table 3 devices, each figure jittered by +-30%) of
// 4-64 devices: solve time per size over `seeds` fleets (`reps` solves each, median), and
// whether a larger fleet of a seed, which holds the smaller one, ever predicts a slower token.
struct FleetRow {
  size_t devices = 0;
  std::vector<double> solve_ms;  // one per seed: the median of its reps
  std::vector<double> tpot_ms;   // one per seed
  uint32_t ilps = 0;             // of the last seed
  uint32_t knapsacks = 0;        // of the last seed
  size_t members = 0;            // of the last seed
};

nlohmann::json fleet_json(const FleetRow& r) {
  auto sorted = r.solve_ms;
  std::sort(sorted.begin(), sorted.end());
  return {{"devices", r.devices},
          {"seeds", r.solve_ms.size()},
          {"median_solve_ms", sorted[sorted.size() / 2]},
          {"max_solve_ms", sorted.back()},
          {"median_tpot_ms", median(r.tpot_ms)}};
}

int run_bench_plan(const Args& args) {
  CLI::App app{"Halda solve time and testbed plans", "bench plan"};
  std::string testbeds = "bench/testbeds";  // relative to the source tree, where benches run
  int reps = 3;
  int seeds = 20;
  int monotonic_seeds = 200;
  std::string which = "both";
  bool json = false;
  app.add_option("--testbeds", testbeds,
                 "directory with the paper-*.json testbeds (default: run from the source tree)");
  app.add_option("--reps", reps, "solves per fleet and testbed (median reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--seeds", seeds, "generated fleets per size for the solve times")
      ->check(CLI::Range(1, 100000));
  app.add_option("--monotonic-seeds", monotonic_seeds,
                 "seeds whose nested fleets (4 in 8 in ... in 64) are checked: more devices never "
                 "predict a slower token (0: skip)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--cost-model", which, "overlap | paper | both")
      ->check(CLI::IsMember({"overlap", "paper", "both"}));
  std::string write_fleets;
  app.add_option(
      "--write-fleets", write_fleets,
      "write the generated fleets as DEVICES.json files into this directory "
      "(fleet-M-seedS.json) and exit; bench/plan/cli_time.sh times `hearth plan` on them");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  if (auto code = parse(app, args)) return *code;
  std::vector<plan::CostModel> models;
  if (which != "paper") models.push_back(plan::CostModel::kOverlap);
  if (which != "overlap") models.push_back(plan::CostModel::kPaper);

  fmt::print("machine: {} hardware threads; solver COIN-OR CBC (the paper uses HiGHS)\n",
             std::thread::hardware_concurrency());
  const auto model = profiler::profile_preset("llama3-70b", 1.0, "q4_k_m");
  fmt::print("model: {} ({:.1f} GiB of weights, L = {})\n\n", model.name,
             model.total_weight_bytes() / (1024.0 * 1024 * 1024), model.n_layers);
  const auto table3 = profile::load_devices_file(testbeds + "/paper-table3.json").devices;
  constexpr size_t kSizes[] = {4, 8, 16, 32, 64};
  if (!write_fleets.empty()) {
    std::filesystem::create_directories(write_fleets);
    for (size_t M : kSizes) {
      for (int s = 0; s < seeds; ++s) {
        const auto path = fmt::format("{}/fleet-{}-seed{}.json", write_fleets, M, s);
        std::ofstream out(path);
        out << profile::devices_to_json({plan::jittered_fleet(table3, M, s)}).dump(1) << "\n";
        if (!out) throw IoError(path + ": cannot write");
      }
    }
    fmt::print("wrote {} fleets to {}\n", seeds * std::size(kSizes), write_fleets);
    return 0;
  }
  nlohmann::json out{{"model", model.name}, {"L", model.n_layers}, {"cost_models", {}}};
  int failures = 0;

  for (plan::CostModel cm : models) {
    nlohmann::json jm{{"cost_model", plan::cost_model_name(cm)}};
    auto problem = [&](std::vector<profile::DeviceProfile> devices) {
      plan::Problem p;
      p.model = model;
      p.options.model = cm;
      p.devices = std::move(devices);
      return p;
    };
    fmt::print("== cost model {} ==\n", plan::cost_model_name(cm));
    fmt::print(
        "solve time, generated fleets (paper Table 3 devices, +-30% jitter), {} seeds x {} reps\n",
        seeds, reps);
    fmt::print("{:>8} {:>16} {:>13} {:>6} {:>10} {:>8} {:>15}\n", "devices", "median_solve_ms",
               "max_solve_ms", "ilps", "knapsacks", "members", "median_tpot_ms");
    for (size_t M : kSizes) {
      FleetRow row;
      row.devices = M;
      for (int s = 0; s < seeds; ++s) {
        const auto p = problem(plan::jittered_fleet(table3, M, static_cast<uint64_t>(s)));
        std::vector<double> ms;
        plan::Plan h;
        for (int r = 0; r < reps; ++r) {
          h = plan::halda(p);
          ms.push_back(h.solve_ms);
        }
        row.solve_ms.push_back(median(ms));
        row.tpot_ms.push_back(h.feasible ? h.predicted_tpot_ms : 0.0);
        row.ilps = h.ilps;
        row.knapsacks = h.knapsacks;
        row.members = 0;
        for (const auto& d : h.devices) row.members += d.dropped ? 0 : 1;
      }
      const auto j = fleet_json(row);
      fmt::print("{:>8} {:>16.1f} {:>13.1f} {:>6} {:>10} {:>8} {:>15.1f}\n", M,
                 j["median_solve_ms"].get<double>(), j["max_solve_ms"].get<double>(), row.ilps,
                 row.knapsacks, row.members, j["median_tpot_ms"].get<double>());
      jm["fleets"].push_back(j);
    }

    if (monotonic_seeds > 0) {
      // A fleet of seed s holds the smaller fleets of seed s as its first devices.
      int worse = 0, checked = 0;
      for (int s = 0; s < monotonic_seeds; ++s) {
        double prev = 0;
        size_t prev_m = 0;
        for (size_t M : kSizes) {
          const auto h = plan::halda(problem(plan::jittered_fleet(table3, M, 1000 + s)));
          if (!h.feasible) continue;
          if (prev > 0) {
            ++checked;
            if (h.predicted_tpot_ms > prev * (1 + 1e-9)) {
              ++worse;
              if (worse <= 5) {
                fmt::print("  seed {}: {} devices predict {:.2f} ms, their first {} {:.2f} ms\n",
                           1000 + s, M, h.predicted_tpot_ms, prev_m, prev);
              }
            }
          }
          prev = h.predicted_tpot_ms;
          prev_m = M;
        }
      }
      fmt::print(
          "monotonicity: {} seeds, {} superset/subset pairs, {} where more devices are slower\n",
          monotonic_seeds, checked, worse);
      jm["monotonic"] = {{"seeds", monotonic_seeds}, {"pairs", checked}, {"worse", worse}};
      failures += worse;
    }
    fmt::print("\n");

    fmt::print("Llama-3-70B Q4_K_M plans, predicted TPOT (ms), ctx 4096; split = device:w/n\n");
    for (const char* file : {"paper-table3-d1-d4.json", "paper-table3.json", "paper-table11.json",
                             "paper-a4.json", "paper-a10.json", "paper-a14.json"}) {
      const auto p = problem(profile::load_devices_file(testbeds + "/" + file).devices);
      std::vector<double> solve_ms;
      plan::Plan h;
      for (int r = 0; r < reps; ++r) {
        h = plan::halda(p);
        solve_ms.push_back(h.solve_ms);
      }
      fmt::print("{}: halda solved in {:.1f} ms (median of {})\n", file, median(solve_ms), reps);
      jm["testbeds"].push_back({{"file", file},
                                {"median_solve_ms", median(solve_ms)},
                                {"tpot_ms", h.predicted_tpot_ms},
                                {"k", h.k}});
      for (const auto& pl : {h, plan::memsched(p), plan::perfsched(p)}) {
        fmt::print("  {:<10} tpot {:>9.1f}  k={:<2} {}{}\n", pl.scheduler, pl.predicted_tpot_ms,
                   pl.k, split_text(pl), pl.feasible ? "" : "  [infeasible: " + pl.reason + "]");
      }
    }
    fmt::print("\n");
    out["cost_models"].push_back(jm);
  }
  if (json) fmt::print("{}\n", out.dump());
  return failures == 0 ? 0 : 1;
}

HEARTH_BENCH("plan",
             "Halda solve time (4-64 devices), monotonicity, testbed plans vs MemSched/PerfSched",
             run_bench_plan);

}  // namespace
}  // namespace hearth::cli
