// `hearth profile`: measure this device for the planner (cached; --refresh re-measures) and
// print it; with --json the last stdout line is one device object of DEVICES.json schema 1.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/profiler/device_profiler.h"

namespace hearth::cli {
namespace {

int run_profile(const Args& args) {
  CLI::App app{"Measure this device (kernels, memory, disk, cores) for the planner", "profile"};
  profiler::ProfilerOptions o;
  bool json = false, no_cache = false;
  app.add_option("-m,--model", o.model_path, "model file (disk reads are measured on it)")
      ->required();
  app.add_option("-t,--threads", o.threads, "threads to measure with (default: all cores)")
      ->check(CLI::Range(0, 1024));
  app.add_option("--name", o.name, "device name (default: host name)");
  app.add_flag("--refresh", o.refresh, "measure again even when a cached profile matches");
  app.add_flag("--no-cache", no_cache, "neither read nor write the profile cache");
  app.add_option("--cache-dir", o.cache_dir, "cache directory (default ~/.cache/hearth)");
  app.add_flag("--json", json, "print the profile as one JSON object on the last line");
  if (auto code = parse(app, args)) return *code;
  o.use_cache = !no_cache;
  o.version = HEARTH_VERSION;

  const auto r = profiler::device_profile(o);
  const auto& d = r.profile;
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  fmt::print("device {}  os {}  cores {}  gpu {}\n", d.name, profile::os_class_name(d.os), d.cores,
             profile::gpu_kind_name(d.gpu.kind));
  fmt::print("memory: {:.2f} GiB total, {:.2f} GiB available, swap {:.2f} GiB\n",
             d.ram_total_bytes / kGiB, d.ram_available_bytes / kGiB, d.swap_available_bytes / kGiB);
  fmt::print("disk (page cache bypassed{}): sequential {:.2f} GB/s, random 64 KiB {:.2f} GB/s\n",
             r.disk_method.empty() ? "" : ", " + r.disk_method, d.disk_seq_read_bps / 1e9,
             d.disk_random_read_bps / 1e9);
  fmt::print("memory read {:.1f} GB/s, KV append {:.2f} us per token per layer\n",
             d.cpu.mem_read_bps / 1e9, d.cpu.kv_copy_s * 1e6);
  fmt::print("matvec GFLOP/s:");
  for (const auto& [type, flops] : d.cpu.flops)
    fmt::print(" {} {:.1f}", gguf::tensor_type_name(type), flops / 1e9);
  fmt::print("\n");
  if (r.from_cache) {
    fmt::print("(cached in {}; --refresh measures again)\n", r.cache_path);
  } else {
    fmt::print("(measured in {:.0f} ms{})\n", r.measure_ms,
               r.cache_path.empty() ? "" : ", cached in " + r.cache_path);
  }
  if (json) fmt::print("{}\n", profile::device_to_json(d).dump());
  return 0;
}

HEARTH_COMMAND("profile", "measure this device for the planner (hearth plan, --plan auto)",
               run_profile);

}  // namespace
}  // namespace hearth::cli
