// `hearth demo` (what `make demo` runs): makes a small synthetic model in a cache directory
// if it is missing, then generates from it and prints what a user came to see — the layer
// assignment, streamed tokens, TTFT/TPOT and memory use.
#include <fmt/core.h>

#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "hearth/base/clock.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/model/generate.h"
#include "hearth/model/synth.h"
#include "hearth/text/vocab.h"

namespace hearth::cli {
namespace {

// The embedded default: a llama-architecture model small enough to make in seconds, deep
// enough (8 layers) to show a layer split.
model::HParams demo_hparams() {
  model::HParams hp;
  hp.arch = model::Arch::kLlama;
  hp.n_layers = 8;
  hp.dim = 512;
  hp.n_heads = 8;
  hp.n_kv_heads = 2;
  hp.head_dim = 64;
  hp.ffn = 1536;
  hp.vocab = 4096;
  hp.ctx_train = 2048;
  hp.rope_base = 500000.0f;
  return hp;
}

int run_demo(const Args& args) {
  CLI::App app{"Run the main job on an embedded default model", "demo"};
  std::string cache = ".cache/demo";
  std::string prompt = "Hello world, the fire in the hearth";
  int n_predict = 48, threads = 0;
  app.add_option("--cache", cache, "directory for the generated model");
  app.add_option("-p,--prompt", prompt, "prompt");
  app.add_option("-n,--n-predict", n_predict, "tokens to generate")->check(CLI::Range(1, 4096));
  app.add_option("-t,--threads", threads, "threads");
  if (auto code = parse(app, args)) return *code;

  const std::string path = cache + "/demo-llama-q4_k_m.gguf";
  if (!std::filesystem::exists(path)) {
    fmt::print("demo: generating a synthetic model (llama, 8 layers, dim 512, Q4_K_M) into {}\n",
               path);
    model::SynthOptions opt;
    opt.hp = demo_hparams();
    opt.types = model::parse_type_recipe("q4_k_m");
    opt.seed = 2026;
    opt.name = "hearth-demo";
    model::write_synthetic_model(opt, path);
  }
  const auto file = gguf::GgufFile::open(path);
  const text::Tokenizer tokenizer(text::load_vocab(file), path);
  model::Engine engine(file, model::EngineOptions{threads, 512, {}});
  const auto& hp = engine.hparams();
  fmt::print("demo: model {} ({:.1f} MiB, {} layers, dim {}, vocab {})\n", path,
             file.file_size() / 1048576.0, hp.n_layers, hp.dim, hp.vocab);
  fmt::print("demo: plan (one device; the ring arrives with `hearth run --workers`)\n");
  fmt::print("  {:<8} {:>4} {:>4}   layers\n", "device", "w", "n");
  fmt::print("  {:<8} {:>4} {:>4}   0-{}\n", "local", hp.n_layers, 0, hp.n_layers - 1);
  fmt::print("demo: prompt: {}\n---\n{}", prompt, prompt);
  std::fflush(stdout);

  model::GenerateParams gp;
  gp.n_predict = n_predict;
  gp.sampling.temperature = 0.0f;  // greedy: the demo prints the same text every time
  model::LocalSource source(engine);
  const auto ids = tokenizer.encode(prompt, true);
  const auto r = model::generate(source, tokenizer, ids, gp, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  fmt::print(
      "\n---\ndemo: {} prompt tokens, {} generated; TTFT {:.1f} ms, TPOT {:.2f} ms ({:.0f} tok/s), "
      "{} threads\n",
      r.prompt_tokens, r.ids.size(), r.ttft_ms, r.tpot_ms, r.tpot_ms > 0 ? 1e3 / r.tpot_ms : 0.0,
      engine.pool().size());
  fmt::print(
      "demo: weights are mmapped ({:.1f} MiB, read-only, in the page cache), KV cache {:.1f} MiB\n",
      file.file_size() / 1048576.0,
      2.0 * hp.n_layers * engine.n_ctx() * hp.kv_dim() * 2 / 1048576.0);
  return 0;
}

HEARTH_COMMAND("demo", "run the main job on an embedded default model", run_demo);

}  // namespace
}  // namespace hearth::cli
