// `hearth perplexity`: perplexity of a text file under a model, chunked as llama.cpp's tool
// (model/perplexity.h), and the KL divergence of its token distributions from a saved
// reference run, to see what a weight type costs in quality.
//
// --kl-divergence-base FILE alone writes the reference: a header, the text's tokens and, for
// every scored token, the log-probabilities over the vocabulary as f32 (4 x vocab bytes per
// token; the format is hearth's own). With --kl-divergence the run reads FILE instead and
// compares: same vocabulary size, chunk size and tokens, or a UsageError naming what differs.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "commands.h"
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/model/engine.h"
#include "hearth/model/perplexity.h"
#include "hearth/text/tokenizer.h"
#include "hearth/text/vocab.h"
#include "load_progress.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

constexpr char kMagic[4] = {'H', 'K', 'L', 'B'};
constexpr uint32_t kVersion = 1;

struct BaseHeader {
  uint32_t vocab = 0, n_ctx = 0, chunks = 0;
  uint64_t n_tokens = 0;
};

void write_base_header(std::ofstream& out, const BaseHeader& h, std::span<const int32_t> tokens) {
  out.write(kMagic, 4);
  const uint32_t v[4] = {kVersion, h.vocab, h.n_ctx, h.chunks};
  out.write(reinterpret_cast<const char*>(v), sizeof v);
  out.write(reinterpret_cast<const char*>(&h.n_tokens), sizeof h.n_tokens);
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)));
}

// Reads and checks the header against this run; leaves `in` at the first log-probabilities.
void read_base_header(std::ifstream& in, const std::string& path, const BaseHeader& want,
                      std::span<const int32_t> tokens) {
  char magic[4];
  uint32_t v[4];
  uint64_t n_tokens = 0;
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(v), sizeof v);
  in.read(reinterpret_cast<char*>(&n_tokens), sizeof n_tokens);
  if (!in || std::memcmp(magic, kMagic, 4) != 0)
    throw UsageError(path + ": not a hearth KL-divergence base file");
  if (v[0] != kVersion)
    throw UsageError(fmt::format("{}: version {}, this build reads {}", path, v[0], kVersion));
  auto same = [&](const char* what, uint64_t got, uint64_t expect) {
    if (got != expect) {
      throw UsageError(
          fmt::format("{}: {} is {}, this run has {} (same model family, -c and "
                      "text needed)",
                      path, what, got, expect));
    }
  };
  same("the vocabulary size", v[1], want.vocab);
  same("the chunk size (-c)", v[2], want.n_ctx);
  same("the number of chunks", v[3], want.chunks);
  same("the number of tokens", n_tokens, want.n_tokens);
  std::vector<int32_t> base_tokens(tokens.size());
  in.read(reinterpret_cast<char*>(base_tokens.data()),
          static_cast<std::streamsize>(base_tokens.size() * sizeof(int32_t)));
  if (!in) throw UsageError(path + ": truncated in its tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (base_tokens[i] != tokens[i]) {
      throw UsageError(
          fmt::format("{}: token {} is {}, this run's is {} (another text or "
                      "tokenizer)",
                      path, i, base_tokens[i], tokens[i]));
    }
  }
}

int run_perplexity(const Args& args) {
  CLI::App app{
      "Perplexity of a text file, chunked as llama.cpp's tool; KL divergence from a "
      "saved reference run",
      "perplexity"};
  ModelOptions mo;
  mo.ctx = 512;
  add_model_options(app, mo);
  std::string text_file, base_file;
  int64_t max_chunks = 0;
  bool kl = false, json = false;
  app.add_option("-f,--file", text_file, "text file to score")->required();
  app.add_option("--chunks", max_chunks, "score at most this many chunks (default: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  app.add_option("--kl-divergence-base", base_file,
                 "reference file: written by this run, or read with --kl-divergence");
  app.add_flag("--kl-divergence", kl, "compare with the reference --kl-divergence-base FILE");
  app.add_flag("--json", json, "print one JSON object as the last line of stdout");
  if (auto code = parse(app, args)) return *code;
  if (kl && base_file.empty()) throw UsageError("--kl-divergence needs --kl-divergence-base FILE");
  if (mo.ctx < 4) throw UsageError("-c must be at least 4 for perplexity");

  const std::string text = read_user_file(text_file, "text file");
  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  const std::vector<int32_t> tokens =
      tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/false);
  warm_model_pages(file);
  model::Engine engine(file, engine_options(mo));

  model::PerplexityOptions po;
  po.n_ctx = mo.ctx;
  po.max_chunks = max_chunks;
  po.bos = tokenizer.vocab().add_bos ? tokenizer.bos() : -1;
  const int64_t whole = static_cast<int64_t>(tokens.size()) / po.n_ctx;
  const int64_t chunks = max_chunks > 0 ? std::min(whole, max_chunks) : whole;
  const BaseHeader header{static_cast<uint32_t>(engine.hparams().vocab),
                          static_cast<uint32_t>(po.n_ctx), static_cast<uint32_t>(chunks),
                          static_cast<uint64_t>(tokens.size())};
  fmt::print(stderr, "perplexity: {} tokens, {} chunks of {}, scoring the second half of each\n",
             tokens.size(), chunks, po.n_ctx);

  std::ofstream base_out;
  std::ifstream base_in;
  if (!base_file.empty() && !kl) {
    base_out.open(base_file, std::ios::binary | std::ios::trunc);
    if (!base_out) throw UsageError(base_file + ": cannot write");
    write_base_header(base_out, header, tokens);
  } else if (kl) {
    base_in.open(base_file, std::ios::binary);
    if (!base_in) throw UsageError(base_file + ": cannot open");
    read_base_header(base_in, base_file, header, tokens);
  }
  // KL(base || this) per token, the base's own NLL, and how often both rank the same token
  // first.
  double kl_sum = 0, kl2_sum = 0, kl_max = 0, base_nll = 0;
  int64_t same_top = 0;
  std::vector<float> base_lp(header.vocab);
  int64_t last_chunk = -1;
  model::PerplexityResult running;
  const auto on_token = [&](int64_t chunk, int64_t, int32_t token, std::span<const float> lp) {
    if (chunk != last_chunk && last_chunk >= 0) {
      fmt::print(stderr, "[{}] {:.4f}\n", last_chunk + 1, running.ppl());
    }
    last_chunk = chunk;
    const double nll = -static_cast<double>(lp[static_cast<size_t>(token)]);
    running.nll_sum += nll;
    ++running.scored;
    if (base_out.is_open()) {
      base_out.write(reinterpret_cast<const char*>(lp.data()),
                     static_cast<std::streamsize>(lp.size_bytes()));
      return;
    }
    if (!base_in.is_open()) return;
    base_in.read(reinterpret_cast<char*>(base_lp.data()),
                 static_cast<std::streamsize>(base_lp.size() * sizeof(float)));
    if (!base_in) throw UsageError(base_file + ": truncated in its log-probabilities");
    double d = 0;
    size_t top_base = 0, top_this = 0;
    for (size_t i = 0; i < base_lp.size(); ++i) {
      const double pb = std::exp(static_cast<double>(base_lp[i]));
      d += pb * (static_cast<double>(base_lp[i]) - static_cast<double>(lp[i]));
      if (base_lp[i] > base_lp[top_base]) top_base = i;
      if (lp[i] > lp[top_this]) top_this = i;
    }
    d = std::max(0.0, d);
    kl_sum += d;
    kl2_sum += d * d;
    kl_max = std::max(kl_max, d);
    same_top += top_base == top_this;
    base_nll += -static_cast<double>(base_lp[static_cast<size_t>(token)]);
  };
  const auto r = model::perplexity(engine, tokens, po, 0, on_token);
  fmt::print(stderr, "[{}] {:.4f}\n", last_chunk + 1, r.ppl());
  if (base_out.is_open()) {
    base_out.flush();
    if (!base_out) throw UsageError(base_file + ": write failed");
  }

  fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f} ({} tokens scored in {} chunks)\n", r.ppl(),
             r.ppl_error(), r.scored, r.chunks);
  nlohmann::json j = {{"ppl", r.ppl()},      {"ppl_error", r.ppl_error()},
                      {"scored", r.scored},  {"chunks", r.chunks},
                      {"n_ctx", po.n_ctx},   {"tokens", tokens.size()},
                      {"nll_sum", r.nll_sum}};
  if (kl) {
    const double n = static_cast<double>(r.scored);
    const double mean = kl_sum / n;
    const double err =
        r.scored > 1 ? std::sqrt(std::max(0.0, kl2_sum / n - mean * mean) / (n - 1)) : 0.0;
    fmt::print(
        "KL divergence from {}: mean {:.6f} +/- {:.6f}, max {:.6f}; same top token {:.2f}%; "
        "reference PPL {:.4f}\n",
        base_file, mean, err, kl_max, 100.0 * static_cast<double>(same_top) / n,
        std::exp(base_nll / n));
    j["kl_mean"] = mean;
    j["kl_error"] = err;
    j["kl_max"] = kl_max;
    j["same_top_fraction"] = static_cast<double>(same_top) / n;
    j["base_ppl"] = std::exp(base_nll / n);
  }
  if (json) fmt::print("{}\n", j.dump());
  return 0;
}

HEARTH_COMMAND("perplexity",
               "perplexity of a text file (-f), and KL divergence from a reference run",
               run_perplexity);

}  // namespace
}  // namespace hearth::cli
