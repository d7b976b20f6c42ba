#include "auto_plan_flags.h"

#include <fmt/core.h>

#include <algorithm>

#include "hearth/model/hparams.h"
#include "hearth/plan/plan.h"
#include "hearth/profiler/device_profiler.h"

namespace hearth::cli {

void add_auto_plan_options(CLI::App& app, AutoPlanFlags& f) {
  app.add_option("--profile", f.profile_file,
                 "with --plan auto: this device's profile from a file (one device object as "
                 "`hearth profile --json` prints) instead of measuring");
  app.add_flag("--no-select", f.no_select,
               "with --plan auto: keep every device (Halda without device selection)");
  app.add_option("--cost-model", f.cost_model,
                 "with --plan auto: overlap (streaming engine) or paper (prima.cpp A.3)")
      ->check(CLI::IsMember({"paper", "overlap"}));
  app.add_option("--rounds", f.rounds,
                 "with --plan auto: consider only k = this many rounds per token (default: "
                 "Halda picks k)")
      ->check(CLI::Range(1u, 1u << 20));
}

cluster::AutoPlanOptions auto_plan_options(const gguf::GgufFile& file, const ModelOptions& mo,
                                           const std::vector<std::string>& workers,
                                           const AutoPlanFlags& flags,
                                           const net::CurveConfig& curve) {
  cluster::AutoPlanOptions ao;
  ao.workers = workers;
  ao.transport.curve = curve;
  ao.select_devices = !flags.no_select;
  ao.cost_model = plan::parse_cost_model(flags.cost_model);
  ao.rounds = flags.rounds;
  const auto hp = model::load_hparams(file);
  ao.ctx = static_cast<uint32_t>(mo.ctx > 0 ? mo.ctx : model::default_n_ctx(hp));
  ao.kv_types = kv_types(mo);
  return ao;
}

// --plan auto: profile this device (cached), gather the workers' profiles and links, run
// Halda, print the plan; docs/ring.md.
cluster::AutoPlan make_auto_plan(const gguf::GgufFile& file, const ModelOptions& mo,
                                 const std::vector<std::string>& workers,
                                 const AutoPlanFlags& flags, std::string_view who,
                                 const net::CurveConfig& curve) {
  const std::string& profile_file = flags.profile_file;
  profiler::ProfilerOptions po;
  po.model_path = mo.model;
  po.threads = mo.threads;
  po.version = HEARTH_VERSION;
  profiler::ProfileResult head;
  if (profile_file.empty()) {
    head = profiler::device_profile(po);
  } else {
    head.profile = profile::load_device_file(profile_file);
    head.from_cache = true;
    head.cache_path = profile_file;
  }
  fmt::print(stderr, "{}: --plan auto: head profile {} ({})\n", who,
             head.from_cache ? "from cache" : fmt::format("measured in {:.0f} ms", head.measure_ms),
             head.cache_path);
  if (flags.head_reserved_bytes > 0) {
    auto& avail = head.profile.ram_available_bytes;
    avail -= std::min(avail, flags.head_reserved_bytes);
    fmt::print(stderr, "{}: --plan auto: {:.0f} MiB of this device kept for the draft model\n", who,
               static_cast<double>(flags.head_reserved_bytes) / (1 << 20));
  }
  const auto ao = auto_plan_options(file, mo, workers, flags, curve);
  auto a = cluster::plan_ring(file, head.profile, ao);
  const auto& p = a.plan;
  fmt::print(stderr, "{}: Halda plan (k = {}, W = {}, ctx {}), solved in {:.1f} ms\n", who, p.k,
             p.W, p.ctx, p.solve_ms);
  fmt::print(stderr, "  {:<28} {:>4} {:>10} {:>10} {:>8} {:>8} {:>9}\n", "device", "w", "compute",
             "memory", "disk", "comm", "total ms");
  for (const auto& d : p.devices) {
    if (d.dropped) {
      fmt::print(stderr, "  {:<28} {:>4}   dropped: told to idle\n", d.name, 0);
      continue;
    }
    const auto& c = d.cost;
    fmt::print(stderr, "  {:<28} {:>4} {:>10.2f} {:>10.2f} {:>8.2f} {:>8.2f} {:>9.2f}{}\n", d.name,
               d.w, c.compute_s * 1e3, c.memory_s * 1e3, c.disk_s * 1e3, c.comm_s * 1e3,
               c.total_s() * 1e3, d.relay ? "  relay (given w = 1)" : "");
  }
  for (size_t i = 0; i < a.links.size(); ++i) {
    fmt::print(stderr, "  link head -> {}: rtt {:.3f} ms, hidden state {:.3f} ms\n",
               a.devices[i + 1].name, a.links[i].rtt_s * 1e3, a.links[i].hidden_s * 1e3);
  }
  fmt::print(stderr, "{}: predicted TPOT {:.2f} ms\n", who, p.predicted_tpot_ms);
  return a;
}

}  // namespace hearth::cli
