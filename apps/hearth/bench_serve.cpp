// `hearth bench serve`: aggregate throughput and per-request TPOT of `hearth serve` under 1,
// 2, 4, 8, 16 concurrent streaming requests (the shape of the paper's Fig. 11), measured
// end to end through HTTP against an in-process server on a free loopback port.
//
// Each level starts N clients at once; each streams a completion of --gen-tokens tokens
// (greedy, end-of-generation ignored, so every request has the same length). Per request:
// TTFT = request sent -> first content chunk, TPOT = (last chunk - first chunk) / (n - 1).
// Aggregate tokens/s = N * gen-tokens / wall time of the level.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_registry.h"
#include "hearth/base/clock.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/serve/backend.h"
#include "hearth/serve/http_lib.h"
#include "hearth/serve/http_server.h"
#include "hearth/text/chat.h"
#include "hearth/text/vocab.h"
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

int run_bench_serve(const Args& args) {
  CLI::App app{"Concurrent-request throughput of hearth serve on this device", "bench serve"};
  ModelOptions mo;
  add_model_options(app, mo);
  std::vector<int> levels = {1, 2, 4, 8, 16};
  int gen_tokens = 32;
  app.add_option("--levels", levels, "concurrent request counts")->delimiter(',');
  app.add_option("--gen-tokens", gen_tokens, "tokens per request")->check(CLI::Range(2, 4096));
  if (auto code = parse(app, args)) return *code;
  const int max_level = *std::max_element(levels.begin(), levels.end());

  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  model::Engine engine(file, model::EngineOptions{mo.threads, mo.ctx, {}});
  serve::LocalBackend backend(engine);
  serve::ServerOptions so;
  so.port = 0;
  so.model_id = "bench";
  so.scheduler.parallel = max_level;
  so.scheduler.max_queue = max_level;
  serve::Server server(backend, tokenizer,
                       std::string(text::builtin_chat_template("chatml").value()), so);
  const int port = server.bind();
  std::thread serving([&] { server.run(); });

  fmt::print(
      "hearth bench serve: {} ({} layers, dim {}), {} threads, {} cores, {} tokens per request\n",
      mo.model, engine.hparams().n_layers, engine.hparams().dim, engine.pool().size(),
      std::thread::hardware_concurrency(), gen_tokens);
  fmt::print("scheduling: sequences interleaved step by step (one engine pass per sequence)\n");
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
  }
  server.stop();
  serving.join();
  return 0;
}

HEARTH_BENCH("serve", "hearth serve: aggregate tok/s and TPOT for 1-16 concurrent requests",
             run_bench_serve);

}  // namespace
}  // namespace hearth::cli
