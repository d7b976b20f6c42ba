// `hearth bench e2e`: whole-model prefill and decode speed of one GGUF file on this device,
// beside the decode roofline (weight bytes read per decoded token / measured memory read
// bandwidth). Prints figures only; comparing them with llama.cpp is docs/benchmarks.md's job.
//
// The runs mirror llama-bench so the two can be read side by side:
//   prefill: one batch of --prompt-tokens random valid ids into a sequence at depth d;
//   decode:  --gen-tokens single-token evaluations into a sequence at depth d;
// where the sequence first holds d positions (--depth, llama-bench's -d: an untimed prefill
// of d random ids, in batches of 512; each timed run truncates back to d). Each figure is
// the median of --reps timed runs after one untimed warm-up. At depth the roofline counts
// the KV cache bytes a decoded token reads (K and V of every layer at the mean position of
// the run) beside the weights. Each timed decode run is paired with a plain parallel read of
// a 1 GiB buffer just before it (compute::time_parallel_read on the engine's pool, timed in
// 64 MiB windows, the best window counting): "mem GB/s" is the median of those reads and
// "ratio" the median per-pair ratio of decode speed to its own roofline, so a machine shared
// with other work moves both halves of a pair alike.
// "other" is the share of decode time outside the weight products (attention, norms, rope,
// quantizing activations: compute::ThreadPool::run_weights) and "us/layer" that time per token
// and layer, both medians over the runs.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "bench_registry.h"
#include "bench_stats.h"
#include "hearth/base/clock.h"
#include "hearth/base/huge_buffer.h"
#include "hearth/compute/bandwidth.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/gguf/tensor_type.h"
#include "hearth/model/engine.h"
#include "hearth/quant/stream_tuning.h"
#include "hearth/quant/type_traits.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

uint64_t view_bytes(const model::WeightView& w) {
  if (w.data == nullptr) return 0;
  return *gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols)) * static_cast<uint64_t>(w.rows);
}

// Bytes a decode step must stream from memory: every layer matrix and norm, the final norm
// and the output matrix, plus one embedding row (the lookup reads only that row). When the
// embeddings are tied the output projection reads the whole table, which is counted once. A
// mixture-of-experts layer reads its router and the k experts the token is routed to.
uint64_t weight_bytes_per_token(const model::ModelWeights& w) {
  const auto& hp = w.hp;
  uint64_t total = 0;
  for (const auto& L : w.layers) {
    for (const auto* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      total += view_bytes(*m);
    total += view_bytes(L.router);
    if (!L.experts.empty()) {
      const auto& E = L.experts.front();
      total += hp.n_experts_used * (view_bytes(E.gate) + view_bytes(E.up) + view_bytes(E.down));
    }
    total += 2ull * hp.dim * sizeof(float);  // attn_norm, ffn_norm
    if (L.bq != nullptr) total += (uint64_t{hp.q_dim()} + 2ull * hp.kv_dim()) * sizeof(float);
  }
  total += uint64_t{hp.dim} * sizeof(float);  // output_norm
  total += view_bytes(w.output);
  total += *gguf::row_bytes(w.token_embd.type, static_cast<uint64_t>(w.token_embd.cols));
  return total;
}

// Random ids spread over the whole vocabulary (xorshift: deterministic and cheap), as
// llama-bench does, so no tokenizer is involved.
std::vector<int32_t> random_tokens(int64_t n, uint32_t vocab, uint64_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));  // (n) token ids
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& id : ids) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    id = static_cast<int32_t>((s >> 11) % vocab);
  }
  return ids;
}

struct Row {
  int threads = 0;
  int64_t depth = 0;
  uint64_t kv_bytes_per_token = 0;  // KV cache bytes a decoded token reads at this depth
  double prefill_tok_s = 0, decode_tok_s = 0;
  double mem_read_gbps = 0, roofline_tok_s = 0;
  double ratio = 0;           // median per-run decode / roofline
  double other_share = 0;     // median share of decode time outside the weight products
  double other_us_layer = 0;  // that time per decoded token and layer, median
  std::vector<double> prefill_runs, decode_runs;  // tok/s of each timed run
};

int run_bench_e2e(const Args& args) {
  CLI::App app{"Prefill and decode tok/s of a GGUF model beside the memory roofline", "bench e2e"};
  std::string model_path;
  bool json = false;
  std::vector<int> thread_counts{1, 2};
  std::vector<int64_t> depths{0};
  int64_t prompt_tokens = 512, gen_tokens = 128;
  int reps = 3;
  uint64_t seed = 1;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  app.add_option("--threads", thread_counts, "thread counts, e.g. 1,2")->delimiter(',');
  app.add_option("--prompt-tokens", prompt_tokens, "prefill batch (0: skip prefill)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--gen-tokens", gen_tokens, "decoded tokens per run (0: skip decode)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--reps", reps, "timed runs per figure (median reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "seed of the random prompt ids");
  app.add_option("--depth", depths,
                 "positions already in the KV cache before each timed run, e.g. 0,2048,8192 "
                 "(llama-bench's -d)")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  std::string repack = "auto", cache_type_k = "f16", cache_type_v = "f16";
  add_repack_option(app, repack);
  add_kv_type_options(app, cache_type_k, cache_type_v);
  int kv_block = 0;
  app.add_option("--kv-block", kv_block,
                 "paged KV in blocks of this many positions, as `hearth serve` keeps it (0: one "
                 "contiguous cache, as run and chat)")
      ->check(CLI::Range(0, 1 << 20));
  if (auto code = parse(app, args)) return *code;
  for (int t : thread_counts) {
    if (t < 1 || t > 1024) {
      fmt::print(stderr, "hearth bench e2e: bad thread count {}\n", t);
      return 2;
    }
  }

  const auto file = gguf::GgufFile::open(model_path);
  const int64_t n_ctx = *std::max_element(depths.begin(), depths.end()) +
                        std::max<int64_t>({prompt_tokens, gen_tokens, 1});

  std::vector<Row> rows;
  uint64_t bytes_per_token = 0, repacked_bytes = 0;
  for (int threads : thread_counts) {
    model::EngineOptions eo;
    eo.threads = threads;
    eo.n_ctx = n_ctx;
    eo.repack = model::parse_repack_mode(repack);
    eo.kv_types = kv_types(cache_type_k, cache_type_v);
    eo.kv_block = kv_block;
    with_memory_status(eo);
    model::Engine engine(file, eo);
    repacked_bytes = engine.repacked_bytes();
    const auto& hp = engine.hparams();
    bytes_per_token = weight_bytes_per_token(engine.weights());
    if (rows.empty()) {
      fmt::print(
          "hearth bench e2e: {} ({} layers, dim {}, ffn {}, vocab {}), {:.1f} MiB weights read "
          "per decoded token, isa {}, stream tuning {}, hardware threads {}, {:.1f} MiB repacked "
          "to rows16\n",
          model_path, hp.n_layers, hp.dim, hp.ffn, hp.vocab,
          static_cast<double>(bytes_per_token) / (1 << 20), quant::isa_name(quant::active_isa()),
          quant::stream_tuning().name, std::thread::hardware_concurrency(),
          static_cast<double>(repacked_bytes) / (1 << 20));
    }
    constexpr size_t kProbeBytes = size_t{1} << 30;
    HugeBuffer probe(kProbeBytes);  // read beside each timed decode run: its roofline
    std::fill(probe.data(), probe.data() + kProbeBytes, uint8_t{1});
    // The best 64 MiB window of one pass over the buffer, as `hearth bench kernels` reads its
    // bandwidth: a single timed pass of the whole GiB often caught a stall of the shared host
    // and read slower than the decode beside it.
    const auto probe_gbps = [&] {
      return compute::best_window_read_gbps(engine.pool(), probe.data(), kProbeBytes);
    };
    const uint64_t kv_per_position =
        engine.kv_types().bytes_per_token(static_cast<int>(hp.n_kv_heads),
                                          static_cast<int>(hp.head_dim)) *
        engine.layers().size();
    std::vector<float> logits(hp.vocab);  // (vocab) f32
    constexpr int64_t kSeq = 0;
    for (int64_t depth : depths) {
      Row row;
      row.threads = engine.pool().size();
      row.depth = depth;
      row.kv_bytes_per_token = static_cast<uint64_t>(
          static_cast<double>(kv_per_position) * (static_cast<double>(depth) + gen_tokens / 2.0));
      const double token_bytes = static_cast<double>(bytes_per_token + row.kv_bytes_per_token);
      // The context the timed runs start from.
      engine.drop(kSeq);
      const auto context = random_tokens(depth, hp.vocab, seed + 2);
      for (int64_t at = 0; at < depth; at += 512) {
        const int64_t n = std::min<int64_t>(512, depth - at);
        engine.eval(kSeq, std::span<const int32_t>(context.data() + at, static_cast<size_t>(n)),
                    nullptr);
      }
      if (prompt_tokens > 0) {
        const auto prompt = random_tokens(prompt_tokens, hp.vocab, seed);
        for (int r = -1; r < reps; ++r) {  // one warm-up run
          engine.truncate(kSeq, depth);
          const double t0 = now_seconds();
          engine.eval(kSeq, prompt, logits.data());
          const double s = now_seconds() - t0;
          if (r >= 0) row.prefill_runs.push_back(static_cast<double>(prompt_tokens) / s);
        }
        row.prefill_tok_s = median(row.prefill_runs);
      }
      std::vector<double> gbps_runs, ratio_runs, other_runs, other_us_runs;  // per decode run
      if (gen_tokens > 0) {
        const auto ids = random_tokens(gen_tokens, hp.vocab, seed + 1);
        for (int r = -1; r < reps; ++r) {
          const double gbps = r >= 0 ? probe_gbps() : 0.0;
          engine.truncate(kSeq, depth);
          // A warm-up of a few tokens is enough to page the weights in and spin the pool up.
          const int64_t n = r < 0 ? std::min<int64_t>(gen_tokens, 4) : gen_tokens;
          const double w0 = engine.pool().weight_seconds();
          const double t0 = now_seconds();
          for (int64_t i = 0; i < n; ++i)
            engine.eval(kSeq, std::span<const int32_t>(&ids[static_cast<size_t>(i)], 1),
                        logits.data());
          const double s = now_seconds() - t0;
          const double other = std::max(0.0, s - (engine.pool().weight_seconds() - w0));
          if (r < 0) continue;
          other_runs.push_back(other / s);
          other_us_runs.push_back(other * 1e6 / static_cast<double>(n * hp.n_layers));
          row.decode_runs.push_back(static_cast<double>(n) / s);
          gbps_runs.push_back(gbps);
          ratio_runs.push_back(row.decode_runs.back() / (gbps * 1e9 / token_bytes));
        }
        row.decode_tok_s = median(row.decode_runs);
        row.other_share = median(other_runs);
        row.other_us_layer = median(other_us_runs);
      } else {
        gbps_runs.push_back(probe_gbps());
      }
      row.mem_read_gbps = median(gbps_runs);
      row.roofline_tok_s = row.mem_read_gbps * 1e9 / token_bytes;
      row.ratio = median(ratio_runs);
      rows.push_back(std::move(row));
    }
    engine.drop(kSeq);
  }

  fmt::print("\nKV cache {}/{}\n{:>7} {:>7} {:>13} {:>12} {:>10} {:>9} {:>13} {:>8} {:>6} {:>9}\n",
             cache_type_k, cache_type_v, "threads", "depth",
             fmt::format("pp{} tok/s", prompt_tokens), fmt::format("tg{} tok/s", gen_tokens),
             "mem GB/s", "KV MiB/t", "roofline t/s", "ratio", "other", "us/layer");
  nlohmann::json jrows = nlohmann::json::array();
  for (const Row& r : rows) {
    const double ratio = r.ratio;
    fmt::print(
        "{:>7} {:>7} {:>13.2f} {:>12.2f} {:>10.1f} {:>9.1f} {:>13.2f} {:>8.2f} {:>6.3f} {:>9.1f}\n",
        r.threads, r.depth, r.prefill_tok_s, r.decode_tok_s, r.mem_read_gbps,
        static_cast<double>(r.kv_bytes_per_token) / (1 << 20), r.roofline_tok_s, ratio,
        r.other_share, r.other_us_layer);
    jrows.push_back({{"threads", r.threads},
                     {"depth", r.depth},
                     {"kv_bytes_per_token", r.kv_bytes_per_token},
                     {"prompt_tokens", prompt_tokens},
                     {"gen_tokens", gen_tokens},
                     {"prefill_tok_s", r.prefill_tok_s},
                     {"decode_tok_s", r.decode_tok_s},
                     {"prefill_runs", r.prefill_runs},
                     {"decode_runs", r.decode_runs},
                     {"mem_read_gbps", r.mem_read_gbps},
                     {"roofline_tok_s", r.roofline_tok_s},
                     {"decode_roofline_ratio", ratio},
                     {"decode_other_share", r.other_share},
                     {"decode_other_us_per_layer", r.other_us_layer}});
  }
  if (json) {
    nlohmann::json out = {{"model", model_path},
                          {"weight_bytes_per_token", bytes_per_token},
                          {"isa", quant::isa_name(quant::active_isa())},
                          {"stream_tuning", quant::stream_tuning().name},
                          {"repacked_bytes", repacked_bytes},
                          {"cache_type_k", cache_type_k},
                          {"cache_type_v", cache_type_v},
                          {"reps", reps},
                          {"rows", jrows}};
    fmt::print("{}\n", out.dump());
  }
  return 0;
}

HEARTH_BENCH("e2e",
             "prefill/decode tok/s of a model vs the memory roofline (-m FILE [--json] "
             "[--threads 1,2] [--prompt-tokens 512] [--gen-tokens 128] [--reps 3])",
             run_bench_e2e);

}  // namespace
}  // namespace hearth::cli
