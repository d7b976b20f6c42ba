// `hearth demo` (what `make demo` runs): makes a small synthetic model in a cache directory if
// it is missing, starts local `hearth worker` processes on loopback, and runs a pipelined ring
// with the head: the layer assignment per round, streamed tokens, TPOT and memory pressure.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/cluster/windows.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/generate.h"
#include "hearth/model/presets.h"
#include "hearth/model/synth.h"
#include "hearth/residency/memory_status.h"
#include "hearth/text/vocab.h"
#include "local_key.h"
#include "local_worker.h"

namespace hearth::cli {
namespace {

int run_demo(const Args& args) {
  CLI::App app{"Run the main job on an embedded default model: a head and local workers", "demo"};
  std::string cache = ".cache/demo";
  std::string prompt = "Hello world, the fire in the hearth";
  std::string plan_text;
  int n_predict = 48, workers = 2;
  app.add_option("--cache", cache, "directory for the generated model");
  app.add_option("-p,--prompt", prompt, "prompt");
  app.add_option("-n,--n-predict", n_predict, "tokens to generate")->check(CLI::Range(1, 4096));
  app.add_option("--workers", workers, "local worker processes besides the head")
      ->check(CLI::Range(0, 7));
  app.add_option("--plan", plan_text,
                 "window per device, head first (default: 2,1,1 with two workers)");
  if (auto code = parse(app, args)) return *code;

  const std::string path = cache + "/demo-llama-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) {
    fmt::print("demo: generating a synthetic model (llama, 8 layers, dim 512, Q4_K_M) into {}\n",
               path);
    model::SynthOptions opt;
    opt.hp = model::find_preset("demo").hparams;
    opt.types = model::parse_type_recipe("q4_k_m");
    opt.seed = 2026;
    opt.name = "hearth-demo";
    model::write_synthetic_model(opt, path);
  }
  const auto file = gguf::GgufFile::open(path);
  const text::Tokenizer tokenizer(text::load_vocab(file), path);
  const auto mem_before = residency::read_memory_status();

  // The ring is encrypted like any other, with a key made for this run.
  const LocalClusterKey key;
  std::vector<std::unique_ptr<LocalWorker>> procs;
  cluster::RingOptions ro;
  ro.transport.curve = key.curve();
  for (int i = 0; i < workers; ++i) {
    const std::string name = fmt::format("worker{}", i + 1);
    const std::string log =
        std::filesystem::temp_directory_path() / ("hearth-demo-" + name + ".log");
    procs.push_back(std::make_unique<LocalWorker>(
        name,
        std::vector<std::string>{"-m", path, "-t", "1", "--name", name, "--key-file", key.path()},
        log));
    ro.workers.push_back(procs.back()->address());
  }
  // Default: W = 4 of 8 layers, so each token goes twice around the ring (k = 2), as in PRP.
  if (plan_text.empty() && workers == 2) plan_text = "2,1,1";
  ro.plan = plan_text.empty() ? cluster::even_split(8, workers + 1)
                              : cluster::parse_plan(plan_text, workers + 1);
  ro.threads = 1;
  ro.n_ctx = 512;
  cluster::RingSource ring(file, ro);
  fmt::print("demo: model {} ({:.1f} MiB, {} layers, dim {}, vocab {})\n", path,
             file.file_size() / 1048576.0, ring.engine().hparams().n_layers,
             ring.engine().hparams().dim, ring.vocab());
  fmt::print(
      "demo: pipelined ring of {} devices on loopback, k = {} rounds per token, links encrypted "
      "with a cluster key made for this run\n",
      ring.devices().size(), ring.rounds());
  fmt::print("  {:<10} {:<24} {:>3}   layers per round\n", "device", "address", "w");
  for (const auto& d : ring.devices()) {
    std::string layers;
    for (const auto& w : d.windows) {
      if (w.end > w.begin)
        layers += fmt::format("{}[{}-{}]", layers.empty() ? "" : " ", w.begin, w.end - 1);
    }
    fmt::print("  {:<10} {:<24} {:>3}   {}\n", d.name, d.address, d.w, layers);
  }
  fmt::print("demo: prompt: {}\n---\n{}", prompt, prompt);
  std::fflush(stdout);

  head::GenerateParams gp;
  gp.n_predict = n_predict;
  gp.sampling.temperature = 0.0f;  // greedy: the same text every time, on any number of devices
  const auto ids = tokenizer.encode(prompt, true);
  const auto r = head::generate(ring, tokenizer, ids, gp, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const auto mem_after = residency::read_memory_status();
  fmt::print(
      "\n---\ndemo: {} prompt tokens, {} generated; TTFT {:.1f} ms, TPOT {:.2f} ms ({:.0f} "
      "tok/s)\n",
      r.prompt_tokens, r.ids.size(), r.ttft_ms, r.tpot_ms, r.tpot_ms > 0 ? 1e3 / r.tpot_ms : 0.0);
  fmt::print(
      "demo: memory pressure on this host: {:.2f}% (drop of available memory, reclaimable "
      "cache counted as available, over total; {:.2f}% counting the page cache as used); "
      "weights stay in the page cache through mmap\n",
      100.0 * residency::memory_pressure(mem_before, mem_after),
      100.0 * residency::memory_pressure_unreclaimed(mem_before, mem_after));
  // Per device, per decoded token (workers report theirs in Stats messages); pressure is the
  // largest drop of available memory over total seen by that device.
  const auto stats = ring.device_stats();
  fmt::print("  {:<10} {:>10} {:>10} {:>10} {:>12} {:>14}\n", "device", "compute ms", "comm ms",
             "wait ms", "reload MiB", "mem pressure");
  for (size_t i = 0; i < stats.size() && i < ring.devices().size(); ++i) {
    const auto& t = stats[i];
    using S = residency::StepStats;
    fmt::print("  {:<10} {:>10.2f} {:>10.2f} {:>10.2f} {:>12.2f} {:>13.2f}%\n",
               ring.devices()[i].name, t.per_token(&S::compute_ms), t.per_token(&S::comm_ms),
               t.per_token(&S::wait_ms), t.per_token(&S::reload_bytes) / 1048576.0,
               100.0 * t.pressure_max);
  }
  return 0;
}

HEARTH_COMMAND("demo", "run the main job: a head and local workers on an embedded default model",
               run_demo);

}  // namespace
}  // namespace hearth::cli
