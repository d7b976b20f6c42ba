// Speculative decoding flags (run, chat, serve), named as llama.cpp's: --model-draft/-md
// (a smaller model with the same vocabulary, run on this device) or --draft-lookup (drafts
// from n-grams already in the context), --draft-max, --draft-min, --draft-p-min.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/drafter.h"
#include "hearth/head/generate.h"
#include "hearth/model/hparams.h"
#include "model_options.h"

namespace hearth::cli {

struct DraftOptions {
  std::string model;  // --model-draft
  bool lookup = false;
  int32_t draft_max = 16, draft_min = 0;
  float p_min = 0.8f;
  int32_t ngram_min = 2, ngram_max = 4;
  bool any() const { return !model.empty() || lookup; }
};

inline void add_draft_options(CLI::App& app, DraftOptions& o) {
  auto* md = app.add_option("--model-draft", o.model,
                            "speculative decoding: draft with this smaller model (same vocabulary; "
                            "runs on this device; also -md)");
  app.add_flag("--draft-lookup", o.lookup,
               "speculative decoding: draft the continuation of the context's latest earlier "
               "occurrence of its last tokens (no second model)")
      ->excludes(md);
  app.add_option("--draft-max", o.draft_max, "tokens drafted per trip at most (default 16)")
      ->check(CLI::Range(1, 256));
  app.add_option("--draft-min", o.draft_min, "fewer drafts than this are not verified (default 0)")
      ->check(CLI::Range(0, 256));
  app.add_option("--draft-p-min", o.p_min,
                 "--model-draft: stop drafting at a token it gives less than this probability "
                 "(default 0.8)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--draft-ngram-min", o.ngram_min,
                 "--draft-lookup: shortest n-gram matched (default 2)")
      ->check(CLI::Range(1, 16));
  app.add_option("--draft-ngram-max", o.ngram_max,
                 "--draft-lookup: longest n-gram matched (default 4)")
      ->check(CLI::Range(1, 16));
}

// Memory a draft model takes on this device: its file (mapped, or copied into the rows16
// layout) and its KV cache at n_ctx for one sequence; 0 without --model-draft.
inline uint64_t draft_memory_bytes(const DraftOptions& o, int64_t n_ctx) {
  if (o.model.empty()) return 0;
  const auto file = gguf::GgufFile::open(o.model);
  const auto hp = model::load_hparams(file);
  const int64_t ctx = n_ctx > 0 ? n_ctx : model::default_n_ctx(hp);
  // The draft engine keeps the default cache types (make_drafter sets none).
  const uint64_t per_token = compute::KvTypes{}.bytes_per_token(static_cast<int>(hp.n_kv_heads),
                                                                static_cast<int>(hp.head_dim));
  return file.file_size() + per_token * hp.n_layers * static_cast<uint64_t>(ctx);
}

// The drafter the flags ask for, with the draft model's file kept alive beside it.
struct DraftSetup {
  std::optional<gguf::GgufFile> file;
  std::unique_ptr<head::Drafter> drafter;
  // Sets the drafting fields of `gp` (none without a drafter).
  void apply(const DraftOptions& o, head::GenerateParams& gp) const {
    gp.drafter = drafter.get();
    gp.draft_max = o.draft_max;
    gp.draft_min = o.draft_min;
  }
};

// `target` is the target model's vocabulary; `n_ctx` its context and `threads` this
// device's (the draft engine runs between the target's steps, so it takes the same cores).
inline DraftSetup make_drafter(const DraftOptions& o, const text::VocabData& target, int64_t n_ctx,
                               int threads) {
  DraftSetup s;
  if (o.draft_min > o.draft_max) {
    throw UsageError(
        fmt::format("--draft-min ({}) is above --draft-max ({})", o.draft_min, o.draft_max));
  }
  if (o.lookup) {
    s.drafter = std::make_unique<head::LookupDrafter>(o.ngram_min, o.ngram_max);
  } else if (!o.model.empty()) {
    s.file.emplace(gguf::GgufFile::open(o.model));
    model::EngineOptions eo;
    eo.threads = threads;
    eo.n_ctx = n_ctx;
    with_memory_status(eo);
    s.drafter = std::make_unique<head::ModelDrafter>(*s.file, o.model, target, eo, o.p_min);
  }
  return s;
}

}  // namespace hearth::cli
