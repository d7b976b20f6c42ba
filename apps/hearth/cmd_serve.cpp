// `hearth serve`: an OpenAI-compatible HTTP server (src/hearth/serve) on this device or at
// the head of a ring. SIGINT/SIGTERM stop it cleanly: running requests are cancelled.
#include <fmt/core.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "commands.h"
#include "draft_options.h"
#include "hearth/base/error.h"
#include "hearth/cluster/recovering_ring.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/logits_source.h"
#include "hearth/model/engine.h"
#include "hearth/model/hparams.h"
#include "hearth/serve/device_status.h"
#include "hearth/serve/http_server.h"
#include "hearth/text/chat.h"
#include "hearth/text/vocab.h"
#include "model_options.h"
#include "residency_options.h"
#include "ring_setup.h"

namespace hearth::cli {
namespace {

// --kv-pool: a count of positions, or auto: every slot's full context in whole blocks, as far
// as half the memory available now holds it (and never less than one full context).
int64_t kv_pool_positions(const std::string& flag, const gguf::GgufFile& file,
                          const model::EngineOptions& eo, int parallel) {
  const model::HParams hp = model::load_hparams(file);
  const int64_t block = std::max(1, eo.kv_block);
  const int64_t n_ctx =
      ((eo.n_ctx > 0 ? eo.n_ctx : model::default_n_ctx(hp)) + block - 1) / block * block;
  if (flag != "auto") {
    char* end = nullptr;
    const long long n = std::strtoll(flag.c_str(), &end, 10);
    if (end == flag.c_str() || *end != '\0' || n < 1 || n > (int64_t{1} << 40)) {
      throw UsageError(
          fmt::format("--kv-pool: '{}' is neither a count of positions nor auto", flag));
    }
    return n;
  }
  const int64_t all = n_ctx * parallel;
  const uint64_t per_position =
      uint64_t{hp.n_layers} *
      eo.kv_types.bytes_per_token(static_cast<int>(hp.n_kv_heads), static_cast<int>(hp.head_dim));
  if (eo.memory_available == 0 || per_position == 0) return all;
  const auto fits = static_cast<int64_t>(eo.memory_available / 2 / per_position);
  return std::max(n_ctx, std::min(all, fits));
}

int run_serve(const Args& args) {
  CLI::App app{"Serve the model over an OpenAI-compatible HTTP API", "serve"};
  ModelOptions mo;
  add_model_options(app, mo);
  serve::ServerOptions so;
  bool host_given = false;
  std::string alias;
  auto* host_opt = app.add_option("--host", so.host,
                                  "address to listen on (default 127.0.0.1; 0.0.0.0 for the LAN)");
  app.add_option("--port", so.port, "TCP port (0: any free port, printed)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--parallel", so.scheduler.parallel, "requests generated concurrently")
      ->check(CLI::Range(1, 256));
  app.add_option("--queue", so.scheduler.max_queue,
                 "requests allowed to wait for a slot; more get HTTP 429")
      ->check(CLI::Range(0, 4096));
  app.add_option("--prefill-chunk", so.scheduler.prefill_chunk,
                 "prompt tokens per step, so long prompts do not stall running streams")
      ->check(CLI::Range(1, 1 << 20));
  int kv_block = 128;
  auto* kv_block_opt =
      app.add_option("--kv-block", kv_block,
                     "positions per block of the paged KV cache (a power of two >= 16); 0: one "
                     "contiguous cache per request, no shared prefixes, no --kv-pool")
          ->check([](const std::string& v) -> std::string {
            const long n = std::strtol(v.c_str(), nullptr, 10);
            return n == 0 || (n >= 16 && n <= (1 << 20) && (n & (n - 1)) == 0)
                       ? ""
                       : "--kv-block must be 0 or a power of two from 16 to 2^20";
          });
  std::string kv_pool = "auto";
  auto* kv_pool_opt =
      app.add_option("--kv-pool", kv_pool,
                     "positions the KV caches of all requests may hold together (-c is per "
                     "request); past it, requests wait in the queue. auto: --parallel x -c in "
                     "whole blocks, at most "
                     "what half the memory available at start holds (never under -c)");
  app.add_option("--queue-timeout", so.scheduler.queue_timeout_s,
                 "seconds a request may wait in the queue for a slot or KV blocks before it "
                 "gets HTTP 503 with Retry-After (0: no limit)")
      ->check(CLI::Range(0.0, 86400.0));
  bool no_prompt_cache = false;
  app.add_flag("--no-prompt-cache", no_prompt_cache,
               "start every request from an empty cache (default: a finished request's "
               "sequence is kept while slots are free, and a request whose prompt starts "
               "with the same tokens computes only the rest)");
  app.add_option("--api-key", so.api_key, "require 'Authorization: Bearer KEY' on every request");
  app.add_option("--alias", alias, "model name to report and accept (default: file name stem)");
  ChatTemplateOptions ct;
  add_chat_template_options(app, ct);
  app.add_option("--max-body", so.max_body_bytes, "largest request body in bytes (413 beyond)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
  app.add_option("--read-timeout", so.read_timeout_s,
                 "seconds a request may take to arrive whole (408 after), and an idle "
                 "connection may stay open")
      ->check(CLI::Range(1, 3600));
  std::string cors;
  app.add_option("--cors", cors,
                 "origins (http://host:port,...) whose web pages may call this server from a "
                 "browser; * for any. Without it only the server's own pages may");
  app.add_option("--max-connections", so.max_connections,
                 "connections open at once; past it the longest-waiting one is dropped")
      ->check(CLI::Range(size_t{8}, size_t{65536}));
  DraftOptions dopt;
  add_draft_options(app, dopt);
  RingFlags rg;
  add_ring_options(app, rg);
  ResidencyFlags rf;  // with --workers: the head's own device
  add_residency_options(app, rf);
  if (auto code = parse(app, args)) return *code;
  so.scheduler.prompt_cache = !no_prompt_cache;
  if (!cors.empty()) so.cors_origins = serve::parse_cors_origins(cors);
  host_given = host_opt->count() > 0;
  if (!host_given) so.host = "127.0.0.1";

  // Signals go to the watcher thread only: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  const std::string tmpl = chat_template(ct, tokenizer.vocab());
  std::unique_ptr<model::Engine> engine;
  HeadRing head;  // re-forms without lost workers, and with workers back or new
  std::unique_ptr<head::LogitsSource> source;
  std::unique_ptr<serve::DeviceStatus> devices;
  if (!rg.ring()) {
    model::EngineOptions eo = engine_options(mo);
    eo.kv_block = kv_block;
    if (kv_block > 0) eo.kv_pool = kv_pool_positions(kv_pool, file, eo, so.scheduler.parallel);
    engine = std::make_unique<model::Engine>(file, eo);
    if (const auto* pool = engine->kv_pool()) {
      fmt::print(stderr,
                 "hearth serve: paged KV: {} blocks of {} positions ({} positions, {:.0f} MiB at "
                 "most)\n",
                 pool->capacity(), pool->block_rows(), pool->capacity() * pool->block_rows(),
                 static_cast<double>(pool->capacity()) * static_cast<double>(pool->block_bytes()) /
                     (1 << 20));
    }
    source = std::make_unique<head::LocalSource>(*engine);
    devices = std::make_unique<serve::LocalStatus>();
  } else {
    if (kv_block_opt->count() + kv_pool_opt->count() > 0) {
      fmt::print(stderr,
                 "hearth serve: --kv-block and --kv-pool apply to a device alone; the ring's "
                 "devices keep one cache per request\n");
    }
    cluster::RingOptions ro;
    ro.threads = mo.threads;
    apply_residency_options(rf, ro.residency);
    ro.residency.repack = model::parse_repack_mode(mo.repack);
    ro.n_ctx = mo.ctx;
    ro.kv_types = kv_types(mo);
    ro.n_seq_max = so.scheduler.parallel;
    rg.auto_plan.head_reserved_bytes = draft_memory_bytes(dopt, mo.ctx);
    head = start_head_ring(file, mo, rg, ro, "hearth serve");
    devices = std::make_unique<serve::RingStatus>(*head.ring);
    so.plan.rounds = head.ring->ring().rounds();
    if (head.auto_plan) {
      so.plan.predicted_tpot_ms = head.auto_plan->plan.predicted_tpot_ms;
      const auto& ap = *head.auto_plan;
      for (size_t i = 0; i < ap.links.size() && i < ap.addresses.size(); ++i) {
        so.plan.link_rtt_ms.emplace_back(ap.addresses[i], ap.links[i].rtt_s * 1e3);
      }
    }
  }
  head::LogitsSource& head_source = source ? *source : *head.ring;
  so.model_id = alias.empty() ? std::filesystem::path(mo.model).stem().string() : alias;
  // The draft model runs on this device, between the target's passes.
  const DraftSetup draft = make_drafter(dopt, tokenizer.vocab(), head_source.n_ctx(), mo.threads);
  so.scheduler.drafter = draft.drafter.get();
  so.scheduler.draft_max = dopt.draft_max;
  so.scheduler.draft_min = dopt.draft_min;

  serve::Server server(head_source, *devices, tokenizer, tmpl, so);
  const int port = server.bind();
  // The first stdout line names the address, so scripts and tests can find a --port 0 server.
  fmt::print("hearth serve: listening on http://{}:{}\n", so.host, port);
  std::fflush(stdout);
  fmt::print(stderr, "hearth serve: model '{}', context {} tokens, {} parallel, queue {}{}{}\n",
             so.model_id, head_source.n_ctx(), so.scheduler.parallel, so.scheduler.max_queue,
             so.api_key.empty() ? "" : ", API key required",
             draft.drafter
                 ? fmt::format(", {} drafts up to {}", draft.drafter->kind(), dopt.draft_max)
                 : std::string());

  std::atomic<bool> run_returned{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (run_returned) return;  // the wake-up below
    fmt::print(stderr, "hearth serve: signal {}, stopping\n", sig);
    // stop() reaches only a server already in its accept loop: a signal that comes between
    // bind() and run() entering it would be lost, and run() would then accept forever. So
    // stop again until run() has returned.
    while (!run_returned) {
      server.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  server.run();
  run_returned = true;
  // run() also returns when listening fails; wake the watcher so it can be joined.
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  return 0;
}

HEARTH_COMMAND("serve", "OpenAI-compatible HTTP server (chat, completions, streaming)", run_serve);

}  // namespace
}  // namespace hearth::cli
