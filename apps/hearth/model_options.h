// CLI options shared by the commands that load a model and generate (run, chat, serve, demo).
// Flag names follow llama.cpp's where the meaning is the same.
#pragma once

#include <CLI/CLI.hpp>

#include <fmt/core.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "hearth/base/error.h"
#include "hearth/model/engine.h"
#include "hearth/residency/memory_status.h"
#include "hearth/text/chat.h"
#include "hearth/text/grammar.h"
#include "hearth/text/json_schema.h"
#include "hearth/text/sampler.h"
#include "hearth/text/vocab.h"

namespace hearth::cli {

struct ModelOptions {
  std::string model;
  int threads = 0;
  int64_t ctx = 0;
  std::string repack = "auto";
  std::string cache_type_k = "f16", cache_type_v = "f16";  // compute::KvType names
};

inline void add_repack_option(CLI::App& app, std::string& repack) {
  app.add_option("--repack", repack,
                 "copy weights into the rows16 layout at load for faster decode: auto (when "
                 "it fits in half the available memory), on, off (read from the file mapping)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
}

// --cache-type-k / --cache-type-v; llama.cpp's -ctk / -ctv are translated to these before
// parsing (commands.cpp). A bad type is a parse error naming the flag.
inline void add_kv_type_options(CLI::App& app, std::string& k, std::string& v) {
  const CLI::Validator kv_type(
      [](std::string& s) -> std::string {
        try {
          compute::parse_kv_type(s);
          return "";
        } catch (const UsageError& e) {
          return e.what();
        }
      },
      "f16|f32|q8_0|q4_0");
  app.add_option("--cache-type-k", k,
                 "KV cache type of K: f16 (default), f32, q8_0, q4_0 (also -ctk); ring workers "
                 "use the head's")
      ->check(kv_type);
  app.add_option("--cache-type-v", v,
                 "KV cache type of V: f16 (default), f32, q8_0, q4_0 (also -ctv)")
      ->check(kv_type);
}

inline void add_model_options(CLI::App& app, ModelOptions& o, bool model_required = true) {
  auto* m = app.add_option("-m,--model", o.model, "GGUF model file");
  if (model_required) m->required();
  app.add_option("-t,--threads", o.threads, "compute threads (default: all cores)")
      ->check(CLI::Range(0, 1024));
  app.add_option("-c,--ctx-size", o.ctx, "context size in tokens (default: min(trained, 4096))")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  add_repack_option(app, o.repack);
  add_kv_type_options(app, o.cache_type_k, o.cache_type_v);
}

// The KV cache types --cache-type-k / --cache-type-v name; UsageError naming the flag.
inline compute::KvTypes kv_types(const std::string& k, const std::string& v) {
  return {compute::parse_kv_type(k, "--cache-type-k"), compute::parse_kv_type(v, "--cache-type-v")};
}
inline compute::KvTypes kv_types(const ModelOptions& o) {
  return kv_types(o.cache_type_k, o.cache_type_v);
}

// This device's free memory now, which --repack auto weighs the repacked copy against.
inline void with_memory_status(model::EngineOptions& e) {
  const residency::MemoryStatus mem = residency::read_memory_status();
  e.memory_available = mem.available;
  e.memory_source = mem.source;
}

// The engine options these flags ask for (layers: all).
inline model::EngineOptions engine_options(const ModelOptions& o) {
  model::EngineOptions e;
  e.threads = o.threads;
  e.n_ctx = o.ctx;
  e.repack = model::parse_repack_mode(o.repack);
  e.kv_types = kv_types(o);
  with_memory_status(e);
  return e;
}

struct SamplingOptions {
  text::SamplerParams params;
  int64_t seed = -1;             // -1: random, printed so the run can be repeated
  std::string grammar_file;      // GBNF
  std::string json_schema_file;  // JSON Schema, turned into a grammar
};

inline void add_sampling_options(CLI::App& app, SamplingOptions& o) {
  app.add_option("--temp", o.params.temperature, "temperature; 0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--top-k", o.params.top_k, "top-k (<= 0: off)");
  app.add_option("--top-p", o.params.top_p, "top-p (1: off)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", o.params.min_p, "min-p (0: off)")->check(CLI::Range(0.0, 1.0));
  app.add_option("--repeat-penalty", o.params.repeat_penalty, "repeat penalty (1: off)")
      ->check(CLI::Range(0.0, 100.0));
  app.add_option("--repeat-last-n", o.params.penalty_last_n, "penalty window (0: off, -1: all)");
  app.add_option("--frequency-penalty", o.params.frequency_penalty, "frequency penalty");
  app.add_option("--presence-penalty", o.params.presence_penalty, "presence penalty");
  app.add_option("-s,--seed", o.seed, "random seed (-1: random)");
  auto* g = app.add_option("--grammar", o.grammar_file,
                           "GBNF grammar file the output must follow (llama.cpp's notation)");
  app.add_option("--json-schema", o.json_schema_file,
                 "JSON Schema file the output must follow (a JSON document)")
      ->excludes(g);
}

// Which chat template: a built-in by name, a Jinja file, or (neither) the model's own.
struct ChatTemplateOptions {
  std::string name, file;
  std::string kwargs;  // JSON object of extra template variables (hearth chat)
};

// --chat-template-kwargs: a JSON object of more template variables, e.g.
// '{"enable_thinking": false}'; null when not given. UsageError naming the flag.
inline nlohmann::ordered_json chat_template_kwargs(const ChatTemplateOptions& o) {
  if (o.kwargs.empty()) return nullptr;
  auto j = nlohmann::ordered_json::parse(o.kwargs, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw UsageError(
        "--chat-template-kwargs must be a JSON object, e.g. '{\"enable_thinking\": false}'");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (text::is_reserved_chat_variable(it.key()))
      throw UsageError(fmt::format("--chat-template-kwargs may not set '{}'", it.key()));
  }
  return j;
}

inline void add_chat_template_options(CLI::App& app, ChatTemplateOptions& o) {
  auto* n = app.add_option(
      "--chat-template", o.name,
      "built-in template (llama2, llama3, chatml, deepseek-r1) instead of the model's");
  app.add_option("--chat-template-file", o.file,
                 "Jinja chat template file instead of the model's (as tokenizer_config.json "
                 "chat_template)")
      ->excludes(n);
}

// A whole text file the user names (a prompt, a text to score); UsageError "PATH: cannot open
// the WHAT" when it cannot be read.
inline std::string read_user_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("{}: cannot open the {}", path, what));
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The template text; UsageError naming the file when it cannot be read.
inline std::string chat_template(const ChatTemplateOptions& o, const text::VocabData& vocab) {
  if (o.file.empty()) return text::select_chat_template(o.name, vocab);
  std::ifstream in(o.file, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read the chat template file {}", o.file));
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The grammar --grammar or --json-schema name, or null. UsageError naming the file.
inline std::shared_ptr<const text::Grammar> load_grammar(const SamplingOptions& o) {
  const std::string& path = o.grammar_file.empty() ? o.json_schema_file : o.grammar_file;
  if (path.empty()) return nullptr;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("cannot read {}", path));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  try {
    if (!o.json_schema_file.empty()) {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
      if (schema.is_discarded()) throw UsageError(fmt::format("{}: not valid JSON", path));
      text = text::json_schema_to_grammar(schema);
    }
    return std::make_shared<const text::Grammar>(text::parse_grammar(text));
  } catch (const Error& e) {
    throw UsageError(fmt::format("{}: {}", path, e.what()));
  }
}

// Resolves a random seed once, so it can be reported.
inline text::SamplerParams resolve_sampling(const SamplingOptions& o) {
  text::SamplerParams p = o.params;
  p.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : std::random_device{}();
  return p;
}

}  // namespace hearth::cli
