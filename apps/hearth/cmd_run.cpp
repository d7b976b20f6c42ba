// `hearth run`: generate a completion of a prompt on this device and stream it to stdout.
#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "auto_plan_flags.h"
#include "commands.h"
#include "draft_options.h"
#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/cluster/auto_plan.h"
#include "hearth/cluster/recovering_ring.h"
#include "hearth/cluster/ring_source.h"
#include "hearth/cluster/windows.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/generate.h"
#include "hearth/model/engine.h"
#include "hearth/model/hparams.h"
#include "hearth/residency/device_meter.h"
#include "hearth/residency/release_policy.h"
#include "hearth/text/vocab.h"
#include "model_options.h"
#include "residency_options.h"
#include "ring_setup.h"

namespace hearth::cli {
namespace {

// Per-device residency metrics (docs/residency.md), per decoded token.
void print_device_stats(const std::vector<cluster::RingDevice>& devs,
                        const std::vector<residency::DeviceTotals>& st) {
  using S = residency::StepStats;
  fmt::print(stderr, "  {:<3} {:<22} {:>5} {:>9} {:>8} {:>8} {:>10} {:>8} {:>10} {:>6} {:>9}\n",
             "dev", "name", "steps", "compute", "comm", "wait", "reload MB", "majflt",
             "prefetch MB", "press", "disk MB/t");
  for (size_t m = 0; m < st.size() && m < devs.size(); ++m) {
    const auto& t = st[m];
    fmt::print(stderr,
               "  {:<3} {:<22} {:>5} {:>7.2f}ms {:>6.2f}ms {:>6.2f}ms {:>10.2f} {:>8.1f} {:>10.2f} "
               "{:>5.1f}% {:>9.2f}\n",
               m, devs[m].name.substr(0, 22), t.steps, t.per_token(&S::compute_ms),
               t.per_token(&S::comm_ms), t.per_token(&S::wait_ms),
               t.per_token(&S::reload_bytes) / 1e6, t.per_token(&S::major_faults),
               t.per_token(&S::prefetch_bytes) / 1e6, 100.0 * t.pressure_max,
               t.per_decode_token(&S::disk_bytes) / 1e6);
  }
}

nlohmann::json device_stats_json(const std::vector<cluster::RingDevice>& devs,
                                 const std::vector<residency::DeviceTotals>& st) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t m = 0; m < st.size() && m < devs.size(); ++m) {
    const auto& t = st[m];
    using S = residency::StepStats;
    out.push_back({{"name", devs[m].name},
                   {"steps", t.steps},
                   {"compute_ms", t.per_token(&S::compute_ms)},
                   {"comm_ms", t.per_token(&S::comm_ms)},
                   {"sends_per_token", t.per_decode_token(&S::sends)},
                   {"wait_ms", t.per_token(&S::wait_ms)},
                   {"reload_bytes", t.per_token(&S::reload_bytes)},
                   {"major_faults", t.per_token(&S::major_faults)},
                   {"prefetch_bytes", t.per_token(&S::prefetch_bytes)},
                   {"release_bytes", t.per_token(&S::release_bytes)},
                   {"prompt_compute_ms", t.prompt_total(&S::compute_ms)},
                   {"pressure_max", t.pressure_max},
                   {"pressure_mean", t.pressure_mean()},
                   {"pressure_unreclaimed_max", t.pressure_unreclaimed_max},
                   {"decode_steps", t.decode_steps},
                   {"disk_bytes_per_token", t.per_decode_token(&S::disk_bytes)},
                   {"stream_bytes_per_token", t.per_decode_token(&S::stream_bytes)},
                   {"read_ms", t.per_decode_token(&S::read_ms)},
                   {"read_exposed_ms", t.per_decode_token(&S::exposed_ms)},
                   {"read_hidden_ms", std::max(0.0, t.per_decode_token(&S::read_ms) -
                                                        t.per_decode_token(&S::exposed_ms))},
                   {"expert_uses_per_token", t.per_decode_token(&S::expert_uses)},
                   {"expert_reads_per_token", t.per_decode_token(&S::expert_reads)},
                   {"expert_bytes_per_token", t.per_decode_token(&S::expert_bytes)},
                   {"expert_active_bytes_per_token", t.per_decode_token(&S::expert_active_bytes)},
                   {"expert_read_ms", t.per_decode_token(&S::expert_read_ms)},
                   {"assigned_bytes", t.sum.assigned_bytes},
                   {"weight_budget_bytes", t.sum.weight_budget_bytes},
                   {"stream_buffer_bytes", t.sum.stream_buffer_bytes}});
  }
  return out;
}

int run_run(const Args& args) {
  CLI::App app{"Generate a completion of a prompt and stream it to stdout", "run"};
  ModelOptions mo;
  SamplingOptions so;
  std::string prompt;
  int32_t n_predict = 128;
  bool json = false, ignore_eos = false;
  add_model_options(app, mo);
  std::string prompt_file;
  auto* p_opt = app.add_option("-p,--prompt", prompt, "prompt text (\"\" = the BOS token alone)");
  auto* f_opt = app.add_option("-f,--file", prompt_file, "read the prompt from this file");
  p_opt->excludes(f_opt);
  f_opt->excludes(p_opt);
  app.add_option("-n,--n-predict", n_predict,
                 "tokens to generate (-1: until end of text or context)")
      ->check(CLI::Range(-1, 1 << 24));
  add_sampling_options(app, so);
  DraftOptions dopt;
  add_draft_options(app, dopt);
  app.add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-generation tokens");
  app.add_flag("--json", json, "print a JSON summary as the last line of stdout");
  RingFlags rg;
  add_ring_options(app, rg);
  std::string prefetch = "on";
  app.add_option("--prefetch", prefetch,
                 "with --workers and k > 1: prefetch each device's next window (on|off)")
      ->check(CLI::IsMember({"on", "off"}));
  ResidencyFlags rf;  // with --workers: the head's own device
  add_residency_options(app, rf);
  if (auto code = parse(app, args)) return *code;
  if (p_opt->count() == 0 && f_opt->count() == 0)
    throw UsageError("give the prompt with -p TEXT or -f FILE");
  if (f_opt->count() > 0) prompt = read_user_file(prompt_file, "prompt file");
  // Before the model loads: a bad grammar file should not cost a model load to find out.
  const std::shared_ptr<const text::Grammar> grammar = load_grammar(so);

  const double t_load = now_ms();
  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  // The ring survives lost workers: it re-forms without them and continues the generation.
  // One device is a ring of one: the same stage, so a model larger than this device's memory
  // streams what does not fit (docs/residency.md).
  const bool local = !rg.ring();
  std::vector<int32_t> ids = tokenizer.encode(prompt, /*add_special=*/true);
  if (prompt.empty() || ids.empty()) ids = {tokenizer.bos()};
  // One completion never holds more than the prompt and -n tokens: the KV cache (and on a
  // ring every device's, and the plan's memory terms) is sized for that when it is less than
  // -c, which leaves the memory to weights and stream buffers.
  if (n_predict >= 0) {
    const int64_t limit = mo.ctx > 0 ? mo.ctx : model::default_n_ctx(model::load_hparams(file));
    const int64_t needed = static_cast<int64_t>(ids.size()) + n_predict;
    if (needed < limit) mo.ctx = needed;
  }
  HeadRing head;
  {
    cluster::RingOptions ro;
    ro.threads = mo.threads;
    apply_residency_options(rf, ro.residency);
    ro.residency.repack = model::parse_repack_mode(mo.repack);
    ro.prefetch = prefetch == "on";
    ro.n_ctx = mo.ctx;
    ro.kv_types = kv_types(mo);
    apply_pipeline_chunk(rg, ro);
    if (local) {
      head.ring = std::make_unique<cluster::RecoveringRing>(
          file, ro, cluster::proportional_replan(ro), /*max_recoveries=*/0);
    } else {
      rg.auto_plan.head_reserved_bytes = draft_memory_bytes(dopt, mo.ctx);
      head = start_head_ring(file, mo, rg, ro, "hearth run");
    }
  }
  cluster::RecoveringRing* const recovering = head.ring.get();
  const std::optional<cluster::AutoPlan>& auto_plan = head.auto_plan;
  // The ring in use (another one after a recovery: fetch it again after generating).
  const auto ring = [&]() -> cluster::RingSource& { return recovering->ring(); };
  if (!local) {
    fmt::print(stderr, "hearth run: ring of {} devices, k = {} round{}\n", ring().devices().size(),
               ring().rounds(), ring().rounds() == 1 ? "" : "s");
    fmt::print(stderr, "  {:<3} {:<28} {:>4}   layers per round\n", "dev", "name", "w");
    for (size_t m = 0; m < ring().devices().size(); ++m) {
      const auto& d = ring().devices()[m];
      std::string ranges;
      for (const auto& win : d.windows) {
        if (!ranges.empty()) ranges += "  ";
        ranges += win.empty() ? std::string("-") : fmt::format("{}-{}", win.begin, win.end - 1);
      }
      fmt::print(stderr, "  {:<3} {:<28} {:>4}   {}\n", m, d.name, d.w, ranges);
    }
  }
  // The draft model runs on this device, between the target's steps.
  const DraftSetup draft =
      make_drafter(dopt, tokenizer.vocab(), recovering->n_ctx(), ring().engine().pool().size());
  const double load_ms = now_ms() - t_load;

  head::GenerateParams gp;
  draft.apply(dopt, gp);
  gp.n_predict = n_predict;
  gp.sampling = resolve_sampling(so);
  gp.grammar = grammar;
  gp.stop_at_eog = !ignore_eos;
  head::LogitsSource& source = *recovering;
  const auto r = head::generate(source, tokenizer, ids, gp, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  const std::vector<residency::DeviceTotals> dev_stats = ring().device_stats();
  if (!local) print_device_stats(ring().devices(), dev_stats);
  fmt::print(stderr,
             "hearth run: {} prompt tokens at {:.1f} tok/s, {} generated, TTFT {:.1f} ms, TPOT "
             "{:.2f} ms ({:.1f} tok/s), stop: {}\n",
             r.prompt_tokens, r.prefill_tok_s, r.ids.size(), r.ttft_ms, r.tpot_ms,
             r.tpot_ms > 0 ? 1e3 / r.tpot_ms : 0.0, r.stop_reason);
  if (gp.drafter != nullptr) {
    fmt::print(stderr,
               "hearth run: {} drafts: {} drafted, {} accepted ({:.0f}%), {:.2f} tokens per "
               "trip\n",
               gp.drafter->kind(), r.drafted, r.accepted,
               r.drafted > 0 ? 100.0 * r.accepted / r.drafted : 0.0, tokens_per_trip(r));
  }
  // The plan is costed for a full context; this run's KV cache held prompt + generated
  // tokens, on average the prompt plus half the generation while decoding.
  const uint32_t run_ctx = static_cast<uint32_t>(r.prompt_tokens + r.ids.size() / 2);
  const double predicted_run_ms =
      auto_plan ? cluster::predicted_tpot_ms_at(*auto_plan, run_ctx) : 0.0;
  if (auto_plan) {
    fmt::print(stderr,
               "hearth run: TPOT predicted {:.2f} ms at ctx {} ({:.2f} ms at this run's mean ctx "
               "{}), measured {:.2f} ms\n",
               auto_plan->plan.predicted_tpot_ms, auto_plan->plan.ctx, predicted_run_ms, run_ctx,
               r.tpot_ms);
  }
  if (json) {
    nlohmann::json j;
    j["ids"] = r.ids;
    j["text"] = r.text;
    j["prompt_tokens"] = r.prompt_tokens;
    j["prompt_ids"] = ids;
    j["ttft_ms"] = r.ttft_ms;
    j["tpot_ms"] = r.tpot_ms;
    j["prefill_tok_s"] = r.prefill_tok_s;
    // The prompt's trip: in chunks following each other around the ring, or in one.
    const auto n_prompt = static_cast<int64_t>(ids.size());
    const int64_t chunk = ring().chunk_for(n_prompt);
    j["prefill"] = {{"chunk", chunk},
                    {"chunks", (n_prompt + chunk - 1) / chunk},
                    {"pipelined", !rg.prefill_serial}};
    if (auto_plan) {
      const auto pm = cluster::prefill_model_of(*auto_plan);
      j["prefill"]["predicted_ttft_ms"] = pm.ttft_s(n_prompt, chunk, !rg.prefill_serial) * 1e3;
      j["prefill"]["predicted_serial_ttft_ms"] = pm.ttft_s(n_prompt, n_prompt) * 1e3;
      j["prefill"]["best_chunk"] = pm.best_chunk(n_prompt);
    }
    j["load_ms"] = load_ms;
    j["stop_reason"] = r.stop_reason;
    j["seed"] = gp.sampling.seed;
    j["draft"] = gp.drafter != nullptr ? nlohmann::json(gp.drafter->kind()) : nlohmann::json();
    j["drafted"] = r.drafted;
    j["accepted"] = r.accepted;
    j["trips"] = r.trips;
    j["tokens_per_trip"] = tokens_per_trip(r);
    j["draft_ms"] = r.draft_ms;
    if (auto_plan && gp.drafter != nullptr && r.trips > 0 && r.ids.size() > 1) {
      // The cost model's trip for this run's mean rows per trip, and the TPOT it gives with
      // the trips and drafting time measured.
      const auto rows = static_cast<int64_t>(
          std::lround(1.0 + static_cast<double>(r.drafted) / static_cast<double>(r.trips)));
      const double trip_ms = cluster::predicted_verify_trip_ms(*auto_plan, rows);
      j["predicted_trip_ms"] = trip_ms;
      j["predicted_tpot_drafted_ms"] = (trip_ms * static_cast<double>(r.trips) + r.draft_ms) /
                                       static_cast<double>(r.ids.size() - 1);
    }
    model::Engine& engine = ring().engine();
    j["threads"] = engine.pool().size();
    j["n_ctx"] = engine.n_ctx();
    if (!local) {
      nlohmann::json devs = nlohmann::json::array();
      for (const auto& d : ring().devices())
        devs.push_back({{"name", d.name}, {"w", d.w}, {"n", 0}});
      j["plan"] = {{"devices", devs}, {"k", ring().rounds()}};
      if (auto_plan) {
        j["plan"]["scheduler"] = "halda";
        j["plan"]["predicted_tpot_ms"] = auto_plan->plan.predicted_tpot_ms;
        j["plan"]["ctx"] = auto_plan->plan.ctx;
        j["plan"]["predicted_tpot_run_ctx_ms"] = predicted_run_ms;
        j["plan"]["run_ctx"] = run_ctx;
        j["plan"]["halda"] = cluster::auto_plan_to_json(*auto_plan);
        j["predicted_tpot_ms"] = auto_plan->plan.predicted_tpot_ms;
        j["predicted_tpot_run_ctx_ms"] = predicted_run_ms;
      }
      j["prefetch"] = {{"on", prefetch == "on"}, {"head_bytes", ring().prefetched_bytes()}};
      j["devices"] = device_stats_json(ring().devices(), dev_stats);
      j["head_release"] = ring().head_releases();
      nlohmann::json recs = nlohmann::json::array();
      for (const auto& rec : recovering->recoveries()) {
        recs.push_back({{"lost", rec.lost},
                        {"devices_left", rec.devices_left},
                        {"plan", rec.plan},
                        {"detect_ms", rec.detect_ms},
                        {"replan_ms", rec.replan_ms},
                        {"rebuild_ms", rec.rebuild_ms},
                        {"replay_ms", rec.replay_ms},
                        {"replayed_tokens", rec.replayed_tokens},
                        {"stall_ms", rec.stall_ms()}});
      }
      j["recoveries"] = recs;
    } else {
      j["plan"] = {{"devices", {{{"name", "local"}, {"w", engine.hparams().n_layers}, {"n", 0}}}},
                   {"k", 1}};
      j["devices"] = device_stats_json(ring().devices(), dev_stats);
      j["devices"][0]["name"] = "local";
    }
    // Invalid UTF-8 can only come from a model emitting partial characters at the very end;
    // replace rather than fail the summary.
    std::fputs(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), stdout);
    std::fputc('\n', stdout);
  }
  return 0;
}

HEARTH_COMMAND("run", "generate a completion of a prompt on this device", run_run);

}  // namespace
}  // namespace hearth::cli
