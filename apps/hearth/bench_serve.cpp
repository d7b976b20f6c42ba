// `hearth bench serve`: aggregate throughput and per-request TPOT of `hearth serve` under 1,
// 2, 4, 8, 16 concurrent streaming requests (the shape of the paper's Fig. 11), measured
// end to end through HTTP against an in-process server on a free loopback port: first on
// this device alone, then at the head of a local ring of --ring processes (the head plus
// `hearth worker` children of this same binary on 127.0.0.1, layers split evenly).
//
// Each level starts N clients at once; each streams a completion of --gen-tokens tokens
// (greedy, end-of-generation ignored, so every request has the same length). Per request:
// TTFT = request sent -> first content chunk, TPOT = (last chunk - first chunk) / (n - 1).
// Aggregate tokens/s = N * gen-tokens / wall time of the level. --compare adds, per table, the
// same levels with the scheduler's batching off (one forward pass per sequence).
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_registry.h"
#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/cluster/recovering_ring.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/logits_source.h"
#include "hearth/model/engine.h"
#include "hearth/serve/device_status.h"
#include "hearth/serve/http_lib.h"
#include "hearth/serve/http_server.h"
#include "hearth/text/chat.h"
#include "hearth/text/vocab.h"
#include "local_key.h"
#include "local_worker.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

struct RequestTiming {
  double ttft_ms = 0, tpot_ms = 0;
  int chunks = 0;
  bool ok = false;
};

RequestTiming one_request(int port, int gen_tokens, int index) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(600, 0);
  const nlohmann::json body = {
      {"prompt", fmt::format("request {} of the serving benchmark", index)},
      {"max_tokens", gen_tokens},
      {"temperature", 0},
      {"ignore_eos", true},
      {"stream", true}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  RequestTiming t;
  double t_first = 0, t_last = 0;
  const double t0 = now_ms();
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    // Each "data:" event with text is one or more tokens; timing uses the first and last.
    const std::string_view s(d, n);
    if (s.find("\"text\":\"") != std::string_view::npos &&
        s.find("\"text\":\"\"") == std::string_view::npos) {
      const double now = now_ms();
      if (t.chunks++ == 0) t_first = now;
      t_last = now;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  t.ok = c.send(req, res, err) && res.status == 200;
  t.ttft_ms = t_first - t0;
  t.tpot_ms = gen_tokens > 1 ? (t_last - t_first) / (gen_tokens - 1) : 0;
  return t;
}

// Runs every concurrency level against a server over `source` and prints one table.
void bench_levels(head::LogitsSource& source, serve::DeviceStatus& devices,
                  const text::Tokenizer& tokenizer, const std::vector<int>& levels, int gen_tokens,
                  bool batched) {
  const int max_level = *std::max_element(levels.begin(), levels.end());
  serve::ServerOptions so;
  so.port = 0;
  so.model_id = "bench";
  so.scheduler.parallel = max_level;
  so.scheduler.max_queue = max_level;
  so.scheduler.batched = batched;
  serve::Server server(source, devices, tokenizer,
                       std::string(text::builtin_chat_template("chatml").value()), so);
  const int port = server.bind();
  std::thread serving([&] { server.run(); });
  fmt::print("{}\n", batched ? "continuous batching (one forward pass per step for all sequences):"
                             : "baseline, interleaved (one forward pass per sequence per step):");
  fmt::print("{:>5} {:>12} {:>12} {:>12} {:>12} {:>10}\n", "conc", "agg tok/s", "TPOT mean",
             "TPOT max", "TTFT mean", "wall s");
  one_request(port, 4, 0);  // warm-up: page in the weights
  for (int n : levels) {
    std::vector<RequestTiming> t(static_cast<size_t>(n));
    std::vector<std::thread> clients;
    const double t0 = now_ms();
    for (int i = 0; i < n; ++i)
      clients.emplace_back([&, i] { t[i] = one_request(port, gen_tokens, i + 1); });
    for (auto& c : clients) c.join();
    const double wall = (now_ms() - t0) / 1e3;
    double tpot_sum = 0, tpot_max = 0, ttft_sum = 0;
    int failed = 0;
    for (const auto& r : t) {
      failed += r.ok ? 0 : 1;
      tpot_sum += r.tpot_ms;
      tpot_max = std::max(tpot_max, r.tpot_ms);
      ttft_sum += r.ttft_ms;
    }
    fmt::print("{:>5} {:>12.1f} {:>9.2f} ms {:>9.2f} ms {:>9.1f} ms {:>10.2f}{}\n", n,
               n * gen_tokens / wall, tpot_sum / n, tpot_max, ttft_sum / n, wall,
               failed ? fmt::format("  ({} failed)", failed) : "");
    std::fflush(stdout);
  }
  server.stop();
  serving.join();
}

int run_bench_serve(const Args& args) {
  CLI::App app{"Concurrent-request throughput of hearth serve, one device and a local ring",
               "bench serve"};
  ModelOptions mo;
  add_model_options(app, mo);
  std::vector<int> levels = {1, 2, 4, 8, 16};
  int gen_tokens = 32;
  int ring = 3;
  int worker_threads = 1;
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "plain TCP ring links (default: encrypted with a key made for this run); compare "
               "the two for the cost of encryption");
  app.add_option("--levels", levels, "concurrent request counts")->delimiter(',');
  app.add_option("--gen-tokens", gen_tokens, "tokens per request")->check(CLI::Range(2, 4096));
  app.add_option("--ring", ring, "devices of the local ring to bench too (0: single device only)")
      ->check(CLI::Range(0, 16));
  app.add_option("--worker-threads", worker_threads, "compute threads of each ring worker")
      ->check(CLI::Range(1, 1024));
  bool compare = false;
  app.add_flag("--compare", compare,
               "also run each table with sequences interleaved (one pass per sequence), the "
               "pre-batching scheduler, for a side-by-side baseline");
  if (auto code = parse(app, args)) return *code;
  if (levels.empty()) throw UsageError("bench serve: --levels is empty");

  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  {
    model::Engine engine(file, engine_options(mo));
    head::LocalSource local(engine);
    serve::LocalStatus devices;
    fmt::print(
        "hearth bench serve: {} ({} layers, dim {}), {} threads, {} cores, {} tokens per "
        "request\n",
        mo.model, engine.hparams().n_layers, engine.hparams().dim, engine.pool().size(),
        std::thread::hardware_concurrency(), gen_tokens);
    fmt::print("\nsingle device:\n");
    bench_levels(local, devices, tokenizer, levels, gen_tokens, true);
    if (compare) bench_levels(local, devices, tokenizer, levels, gen_tokens, false);
  }
  if (ring >= 2) {
    // Encrypted links with a key made for this run, as every ring has; --insecure: plain TCP.
    const LocalClusterKey key;
    std::vector<std::unique_ptr<LocalWorker>> workers;
    cluster::RingOptions ro;
    if (!insecure) ro.transport.curve = key.curve();
    std::vector<std::string> flags = {"-t", std::to_string(worker_threads), "-m", mo.model};
    if (insecure) {
      flags.emplace_back("--insecure");
    } else {
      flags.insert(flags.end(), {"--key-file", key.path()});
    }
    for (int i = 1; i < ring; ++i) {
      workers.push_back(std::make_unique<LocalWorker>(fmt::format("worker{}", i), flags, ""));
      ro.workers.push_back(workers.back()->address());
    }
    ro.threads = mo.threads;
    ro.residency.repack = model::parse_repack_mode(mo.repack);
    ro.n_ctx = mo.ctx;
    ro.kv_types = kv_types(mo);
    ro.n_seq_max = *std::max_element(levels.begin(), levels.end());
    cluster::RecoveringRing recovering(file, ro, cluster::proportional_replan(ro));
    const cluster::RingSource& source = recovering.ring();
    serve::RingStatus devices(recovering);
    std::string plan;
    for (const auto& d : source.devices()) plan += (plan.empty() ? "" : ",") + std::to_string(d.w);
    fmt::print(
        "\n{}-process ring on 127.0.0.1 (head + {} workers of {} thread(s), plan {}, {} "
        "round(s), {} links); batched, one Activations message per hop carries the whole "
        "step:\n",
        ring, ring - 1, worker_threads, plan, source.rounds(),
        insecure ? "plain TCP" : "encrypted");
    bench_levels(recovering, devices, tokenizer, levels, gen_tokens, true);
    if (compare) bench_levels(recovering, devices, tokenizer, levels, gen_tokens, false);
  }
  return 0;
}

HEARTH_BENCH("serve",
             "hearth serve: aggregate tok/s and TPOT for 1-16 concurrent requests, one device "
             "and a local 3-process ring",
             run_bench_serve);

}  // namespace
}  // namespace hearth::cli
