// `hearth plan`: which devices run how many layers (w), how many on the GPU (n), and the
// predicted time per output token, from device profiles (DEVICES.json) and a model shape.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/plan/baselines.h"
#include "hearth/plan/halda.h"
#include "hearth/profiler/model_profiler.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

void print_table(const plan::Plan& p) {
  fmt::print("model {}  L={}  ctx={}  scheduler {}  cost model {}\n", p.model, p.L, p.ctx,
             p.scheduler, plan::cost_model_name(p.cost_model));
  if (p.W == 0) {
    fmt::print("no feasible plan: {}\n", p.reason);
    return;
  }
  fmt::print("{:<12} {:>4} {:>4} {:>7} {:>7} {:>11} {:>10} {:>9} {:>10} {:>9} {:>10}  {}\n",
             "device", "w", "n", "layers", "gpu", "compute_ms", "memory_ms", "disk_ms",
             "exposed_ms", "comm_ms", "total_ms", "");
  for (const auto& d : p.devices) {
    if (d.dropped) {
      fmt::print("{:<12} {:>4} {:>4}  dropped\n", d.name, 0, 0);
      continue;
    }
    const auto& c = d.cost;
    std::string note;
    if (d.relay) {
      note = "relay";
    } else if (c.stream_buffer_bytes > 0) {
      note = fmt::format("streams {:.0f} MiB/token, buffer {:.0f} MiB",
                         c.stream_bytes / (1024.0 * 1024.0),
                         c.stream_buffer_bytes / (1024.0 * 1024.0));
    } else if (c.expert_read_bytes > 0) {
      note =
          fmt::format("reads {:.0f} MiB/token of experts", c.expert_read_bytes / (1024.0 * 1024.0));
    } else if (c.overloaded) {
      note = "overloaded (reloads from disk)";
    }
    if (c.stream_buffer_bytes > 0 && c.expert_read_bytes > 0) {
      note += fmt::format(" (experts {:.0f} MiB)", c.expert_read_bytes / (1024.0 * 1024.0));
    }
    fmt::print(
        "{:<12} {:>4} {:>4} {:>7} {:>7} {:>11.2f} {:>10.2f} {:>9.2f} {:>10.2f} {:>9.2f} {:>10.2f}  "
        "{}\n",
        d.name, d.w, d.n, c.layers, c.gpu_layers, c.compute_s * 1e3, c.memory_s * 1e3,
        c.disk_s * 1e3, c.exposed_s * 1e3, c.comm_s * 1e3, c.total_s() * 1e3, note);
  }
  fmt::print("k={} rounds, W={}  predicted TPOT {:.1f} ms  (solved in {:.2f} ms)\n", p.k, p.W,
             p.predicted_tpot_ms, p.solve_ms);
  if (!p.feasible) fmt::print("NOT FEASIBLE: {}\n", p.reason);
}

int run_plan(const Args& args) {
  CLI::App app{"Plan layer windows over a ring of devices and predict TPOT", "plan"};
  std::string model_path, preset, devices_path, scheduler = "halda", scheme = "q4_k_m";
  std::string cost_model = "overlap";
  double scale = 1.0, slow_disk_gbps = 0.1;
  uint32_t ctx = 4096, rounds = 0;
  bool json = false, no_refine = false, no_select = false, no_streaming = false;
  auto* m = app.add_option("-m,--model", model_path, "GGUF model file");
  auto* pr = app.add_option("--preset", preset, "named model shape (see `hearth synth --help`)");
  m->excludes(pr);
  app.add_option("--scale", scale, "shrink the preset's width by this factor (0, 1]");
  app.add_option("--type", scheme,
                 "quantization scheme of a preset (q4_k_m, q4_k, q6_k, q8_0, f16, ...)");
  app.add_option("--devices", devices_path, "DEVICES.json with the device profiles")->required();
  app.add_option("--scheduler", scheduler, "halda | memsched | perfsched | exhaustive")
      ->check(CLI::IsMember({"halda", "memsched", "perfsched", "exhaustive"}));
  app.add_option("-c,--ctx-size,--ctx", ctx, "context length the KV cache is sized for");
  std::string cache_type_k = "f16", cache_type_v = "f16";
  add_kv_type_options(app, cache_type_k, cache_type_v);
  app.add_option("--cost-model", cost_model,
                 "overlap (streaming engine, reads hidden behind compute) | paper (prima.cpp A.3)")
      ->check(CLI::IsMember({"paper", "overlap"}));
  app.add_flag("--no-streaming", no_streaming,
               "overlap cost model: devices run plain mmap (a device over its memory re-reads "
               "all its weights every token)");
  app.add_option("--slow-disk-gbps", slow_disk_gbps,
                 "disks slower than this may not be overloaded");
  std::string solver = "search";
  app.add_option("--solver", solver,
                 "Halda: search (exact knapsack search over devices and layers) | ilp (CBC: "
                 "the overlap model's MILP, or the paper's Algorithm 1 and drop loop)")
      ->check(CLI::IsMember({"search", "ilp"}));
  app.add_flag("--no-refine", no_refine,
               "Halda, paper cost model with --solver ilp or --no-select: the paper's Algorithm "
               "1 only, without set refinement");
  app.add_flag("--no-select", no_select, "Halda: keep every device (no device selection)");
  app.add_option("--rounds", rounds,
                 "Halda: consider only k = this many rounds per token (default: Halda picks k)")
      ->check(CLI::Range(1u, 1u << 20));
  app.add_flag("--json", json, "print the plan as one JSON object on the last line");
  if (auto code = parse(app, args)) return *code;
  if (model_path.empty() == preset.empty())
    throw UsageError("give exactly one of -m FILE or --preset NAME");
  if (ctx == 0) throw UsageError("--ctx must be positive");

  plan::Problem problem;
  problem.model = model_path.empty() ? profiler::profile_preset(preset, scale, scheme)
                                     : profiler::profile_model_file(model_path);
  profiler::set_kv_types(problem.model, kv_types(cache_type_k, cache_type_v));
  problem.devices = profile::load_devices_file(devices_path).devices;
  problem.options.ctx = ctx;
  problem.options.slow_disk_bps = slow_disk_gbps * 1e9;
  problem.options.model = plan::parse_cost_model(cost_model);
  problem.options.streaming = !no_streaming;

  plan::Plan result;
  if (scheduler == "halda") {
    plan::HaldaOptions opt;
    opt.refine = !no_refine;
    opt.select_devices = !no_select;
    opt.rounds = rounds;
    opt.milp = solver == "ilp";
    result = plan::halda(problem, opt);
  } else {
    result = plan::schedule(problem, scheduler);
  }
  print_table(result);
  if (json) fmt::print("{}\n", plan::plan_to_json(result).dump());
  return result.feasible ? 0 : 1;
}

HEARTH_COMMAND("plan", "plan layer windows over devices (Halda) and predict TPOT", run_plan);

}  // namespace
}  // namespace hearth::cli
