// `hearth chat`: interactive multi-turn chat. Each turn renders the whole conversation with the
// model's chat template, then evaluates only what the KV cache does not already hold (the
// longest common token prefix is kept), so earlier turns are never recomputed.
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "draft_options.h"
#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/generate.h"
#include "hearth/model/engine.h"
#include "hearth/text/chat.h"
#include "hearth/text/vocab.h"
#include "load_progress.h"
#include "model_options.h"

namespace hearth::cli {
namespace {

int run_chat(const Args& args) {
  CLI::App app{"Chat with a model, keeping the KV cache between turns (ends on /exit or EOF)",
               "chat"};
  ModelOptions mo;
  SamplingOptions so;
  std::string system_prompt;
  int32_t n_predict = -1;
  add_model_options(app, mo);
  app.add_option("--system", system_prompt, "system message");
  ChatTemplateOptions ct;
  add_chat_template_options(app, ct);
  app.add_option("--chat-template-kwargs", ct.kwargs,
                 "JSON object of more template variables, e.g. '{\"enable_thinking\": false}'");
  app.add_option("-n,--n-predict", n_predict, "tokens per reply at most (-1: until end of turn)");
  add_sampling_options(app, so);
  DraftOptions dopt;
  add_draft_options(app, dopt);
  if (auto code = parse(app, args)) return *code;
  // Before the model loads: a bad grammar file should not cost a model load to find out.
  const std::shared_ptr<const text::Grammar> grammar = load_grammar(so);

  const auto file = gguf::GgufFile::open(mo.model);
  const text::Tokenizer tokenizer(text::load_vocab(file), mo.model);
  const std::string tmpl = chat_template(ct, tokenizer.vocab());
  const nlohmann::ordered_json kwargs = chat_template_kwargs(ct);
  warm_model_pages(file);
  model::Engine engine(file, engine_options(mo));
  head::LocalSource source(engine);
  const DraftSetup draft =
      make_drafter(dopt, tokenizer.vocab(), engine.n_ctx(), engine.pool().size());
  const bool interactive = isatty(STDIN_FILENO) != 0;
  const std::string bos = tokenizer.bos() >= 0 ? tokenizer.piece(tokenizer.bos()) : "";
  const std::string eos = tokenizer.eos() >= 0 ? tokenizer.piece(tokenizer.eos()) : "";

  std::vector<text::ChatMessage> messages;
  if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
  std::vector<int32_t> cached;  // token ids the cache of sequence 0 holds, in order
  head::GenerateParams gp;
  gp.n_predict = n_predict;
  gp.sampling = resolve_sampling(so);
  gp.grammar = grammar;
  draft.apply(dopt, gp);
  if (interactive) fmt::print(stderr, "hearth chat: {} — type /exit or Ctrl-D to end\n", mo.model);

  std::string line;
  while (true) {
    if (interactive) {
      fmt::print("> ");
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit") break;
    if (line.empty()) continue;
    messages.push_back({"user", line});
    nlohmann::ordered_json turns = nlohmann::ordered_json::array();
    for (const auto& m : messages) turns.push_back({{"role", m.role}, {"content", m.content}});
    const std::string rendered = text::render_chat(tmpl, turns, nullptr, true, bos, eos, kwargs);
    std::vector<int32_t> ids =
        tokenizer.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
    if (tokenizer.vocab().add_bos && tokenizer.bos() >= 0 &&
        (ids.empty() || ids[0] != tokenizer.bos())) {
      ids.insert(ids.begin(), tokenizer.bos());
    }
    // Keep the common prefix in the cache; evaluate the rest. One token is always evaluated
    // so there are logits to sample from.
    size_t keep = 0;
    while (keep < cached.size() && keep < ids.size() && cached[keep] == ids[keep]) ++keep;
    if (keep == ids.size()) --keep;
    engine.truncate(0, static_cast<int64_t>(keep));
    cached.resize(keep);
    const std::span<const int32_t> fresh(ids.data() + keep, ids.size() - keep);
    gp.past = cached;  // the drafter sees the whole conversation
    const auto r = head::generate(source, tokenizer, fresh, gp, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    });
    fmt::print("\n");
    cached.insert(cached.end(), fresh.begin(), fresh.end());
    // The cache now also holds every generated token but the last (never fed back).
    if (!r.ids.empty()) cached.insert(cached.end(), r.ids.begin(), r.ids.end() - 1);
    engine.truncate(0, static_cast<int64_t>(cached.size()));
    messages.push_back({"assistant", r.text});
    if (interactive) {
      const std::string drafts =
          gp.drafter == nullptr ? std::string()
                                : fmt::format(", {} of {} drafts accepted, {:.2f} tokens per trip",
                                              r.accepted, r.drafted, head::tokens_per_trip(r));
      fmt::print(stderr, "[{} tokens, {:.1f} tok/s, context {}/{}{}]\n", r.ids.size(),
                 r.tpot_ms > 0 ? 1e3 / r.tpot_ms : 0.0, cached.size(), engine.n_ctx(), drafts);
    }
    if (r.stop_reason == "context") {
      throw UsageError(
          fmt::format("context full ({} tokens): start a new chat or raise -c", engine.n_ctx()));
    }
  }
  return 0;
}

HEARTH_COMMAND("chat", "interactive multi-turn chat on this device", run_chat);

}  // namespace
}  // namespace hearth::cli
