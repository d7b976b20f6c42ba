// `hearth run` as a user calls it: a real process on a synthetic model.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <fstream>

#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "hearth/model/synth.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"

namespace hearth::model {
namespace {

using testing::last_json_line;

testing::CommandResult run(const std::string& args) {
  return testing::run_hearth(args);
}

const std::string& model_path() {
  static const std::string path = [] {
    const auto p =
        (hearth::testing::scratch_dir() / ("hearth_run_cli_" + std::to_string(getpid()) + ".gguf"))
            .string();
    SynthOptions opt;
    opt.hp.arch = Arch::kLlama;
    opt.hp.n_layers = 3;
    opt.hp.dim = 256;
    opt.hp.n_heads = 4;
    opt.hp.n_kv_heads = 2;
    opt.hp.head_dim = 64;
    opt.hp.ffn = 512;
    opt.hp.vocab = 600;
    opt.hp.ctx_train = 128;
    opt.types = parse_type_recipe("q8_0");
    write_synthetic_model(opt, p);
    return p;
  }();
  return path;
}

TEST(RunCli, GreedyJsonIsDeterministicAcrossThreadCounts) {
  const auto a =
      run("run -m " + model_path() + " -p 'the house and the fire' -n 12 --temp 0 -t 1 --json");
  ASSERT_EQ(a.exit_code, 0) << a.all();
  const auto b =
      run("run -m " + model_path() + " -p 'the house and the fire' -n 12 --temp 0 -t 2 --json");
  ASSERT_EQ(b.exit_code, 0) << b.all();
  const auto ja = last_json_line(a.out), jb = last_json_line(b.out);
  EXPECT_EQ(ja["ids"].size(), 12u);
  EXPECT_EQ(ja["ids"], jb["ids"]);
  EXPECT_GT(ja["prompt_tokens"].get<int>(), 1);
  EXPECT_GE(ja["tpot_ms"].get<double>(), 0.0);
  EXPECT_TRUE(ja.contains("ttft_ms"));
  EXPECT_TRUE(ja["text"].is_string());
}

// A device alone runs a long prompt in chunks (--pipeline-chunk) one after another: the same
// ids as in one pass.
TEST(RunCli, ChunkedPromptOnOneDeviceGivesTheSameIds) {
  std::string prompt;
  for (int i = 0; i < 6; ++i) prompt += "the house and the fire and the smoke ";
  const std::string cmd = "run -m " + model_path() + " -p '" + prompt + "' -n 6 --temp 0 --json";
  const auto whole = run(cmd);
  ASSERT_EQ(whole.exit_code, 0) << whole.all();
  const auto jw = last_json_line(whole.out);
  EXPECT_EQ(jw["prefill"]["chunks"], 1);
  for (const char* chunk : {"5", "16"}) {
    const auto r = run(cmd + " --pipeline-chunk " + chunk);
    ASSERT_EQ(r.exit_code, 0) << chunk << "\n" << r.all();
    const auto j = last_json_line(r.out);
    EXPECT_EQ(j["ids"], jw["ids"]) << chunk;
    EXPECT_EQ(j["prefill"]["chunk"], std::stoi(chunk));
    EXPECT_GT(j["prefill"]["chunks"].get<int>(), 1);
  }
}

// One completion holds at most the prompt and -n tokens, so its KV cache is sized for that
// when -c asks for more; the answer does not change.
TEST(RunCli, TheContextIsSizedForThePromptAndTheTokensAsked) {
  const std::string cmd = "run -m " + model_path() + " -p 'the house and the fire' --temp 0 --json";
  const auto a = run(cmd + " -n 6 -c 128");
  ASSERT_EQ(a.exit_code, 0) << a.all();
  const auto ja = last_json_line(a.out);
  EXPECT_EQ(ja["n_ctx"].get<int>(), ja["prompt_tokens"].get<int>() + 6);
  const int sized = ja["n_ctx"].get<int>();
  const auto b = run(cmd + " -n 6 -c " + std::to_string(sized + 30));
  ASSERT_EQ(b.exit_code, 0) << b.all();
  EXPECT_EQ(last_json_line(b.out)["n_ctx"], sized);
  EXPECT_EQ(last_json_line(b.out)["ids"], ja["ids"]);
  const auto d = run(cmd + " -n 6 -c " + std::to_string(sized - 2));  // -c is less: -c
  ASSERT_EQ(d.exit_code, 0) << d.all();
  EXPECT_EQ(last_json_line(d.out)["n_ctx"], sized - 2);
  // -n -1 runs until the end of text or the context: the whole -c, or the model's default.
  const auto c = run(cmd + " -n -1 -c 48 --ignore-eos");
  ASSERT_EQ(c.exit_code, 0) << c.all();
  EXPECT_EQ(last_json_line(c.out)["n_ctx"], 48);
}

TEST(RunCli, EmptyPromptMeansBosAlone) {
  const auto r = run("run -m " + model_path() + " -p '' -n 3 --temp 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto j = last_json_line(r.out);
  ASSERT_EQ(j["prompt_ids"].size(), 1u);
  EXPECT_EQ(j["prompt_tokens"], 1);
}

TEST(RunCli, SeededSamplingReproduces) {
  const std::string cmd =
      "run -m " + model_path() + " -p 'hello' -n 10 --temp 1.0 --seed 77 --json";
  const auto a = run(cmd), b = run(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.all();
  EXPECT_EQ(last_json_line(a.out)["ids"], last_json_line(b.out)["ids"]);
  EXPECT_EQ(last_json_line(a.out)["seed"], 77);
}

TEST(RunCli, JsonSchemaAndGrammarHoldTheOutput) {
  const auto dir = hearth::testing::scratch_dir();
  const std::string schema =
      (dir / ("hearth_run_schema_" + std::to_string(getpid()) + ".json")).string();
  const std::string grammar =
      (dir / ("hearth_run_grammar_" + std::to_string(getpid()) + ".gbnf")).string();
  std::ofstream(schema) << R"({"type": "object", "properties": {"size": {"enum": ["s", "m"]},
                               "n": {"type": "integer"}}, "required": ["size", "n"]})";
  std::ofstream(grammar) << "root ::= (\"yes\" | \"no\") \".\"\n";
  auto r = run("run -m " + model_path() + " -c 2048 -p 'hello' -n 1000 --temp 0 --json-schema " +
               schema + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const auto out = last_json_line(r.out);
  EXPECT_EQ(out["stop_reason"], "grammar") << r.all();
  const auto doc = nlohmann::json::parse(out["text"].get<std::string>());
  EXPECT_TRUE(doc["size"] == "s" || doc["size"] == "m") << doc;
  EXPECT_TRUE(doc["n"].is_number_integer()) << doc;
  r = run("run -m " + model_path() + " -p 'hello' -n 50 --temp 1 --seed 3 --grammar " + grammar +
          " --json");
  ASSERT_EQ(r.exit_code, 0) << r.all();
  const std::string text = last_json_line(r.out)["text"];
  EXPECT_TRUE(text == "yes." || text == "no.") << text;
  // A bad grammar is a usage error naming the file, before the model loads.
  std::ofstream(grammar) << "root ::= missing\n";
  r = run("run -m /nonexistent.gguf -p hi --grammar " + grammar);
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.all().find(grammar), std::string::npos) << r.all();
  EXPECT_NE(r.all().find("'missing'"), std::string::npos) << r.all();
  std::filesystem::remove(schema);
  std::filesystem::remove(grammar);
}

TEST(RunCli, BadInputGetsClearErrors) {
  auto r = run("run -m /nonexistent.gguf -p hi");
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_NE(r.all().find("/nonexistent.gguf"), std::string::npos);
  r = run("run -m " + model_path() + " -p hi --temp banana");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  r = run("run -p hi");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  r = run("run -m " + model_path() + " -p hi --repack sometimes");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.all().find("--repack"), std::string::npos) << r.all();
  // A prompt longer than the context is refused with a message that says so.
  std::string long_prompt;
  for (int i = 0; i < 50; ++i) long_prompt += "the house ";
  r = run("run -m " + model_path() + " -c 16 -p '" + long_prompt + "' -n 4");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  EXPECT_NE(r.all().find("context"), std::string::npos) << r.all();
  // Generation that runs into the end of the context stops cleanly.
  r = run("run -m " + model_path() + " -c 16 -p 'the house' -n 100 --temp 0 --ignore-eos --json");
  ASSERT_EQ(r.exit_code, 0) << r.all();
  EXPECT_EQ(last_json_line(r.out)["stop_reason"], "context");
  // A file that is not GGUF.
  r = run("run -m /etc/passwd -p hi");
  EXPECT_EQ(r.exit_code, 1) << r.all();
  EXPECT_NE(r.all().find("not a GGUF file"), std::string::npos) << r.all();
}

// `hearth synth` writes a mixture of experts in either layout, and refuses expert flags that
// make no model, naming them, with exit 2.
TEST(SynthCli, MixturesOfExpertsAndBadExpertFlags) {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_synth_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "m.gguf").string();
  for (const std::string layout : {"merged", "split"}) {
    const auto r =
        run("synth --arch qwen3moe --layers 2 --dim 256 --heads 2 --kv-heads 1 --head-dim "
            "128 --experts 8 --experts-used 2 --expert-ffn 256 --type q8_0 "
            "--expert-layout " +
            layout + " -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.all();
    EXPECT_NE(r.err.find("8 experts of 256, 2 used"), std::string::npos) << r.err;
    const auto gen = run("run -m " + out + " -p hi -n 3 --temp 0 --ignore-eos --json");
    ASSERT_EQ(gen.exit_code, 0) << gen.all();
  }
  struct Case {
    std::string flags, named;
  };
  for (const Case& c : {Case{"--arch qwen3moe --experts 4 --experts-used 9", "--experts-used"},
                        Case{"--arch llama --experts-used 2", "--experts"},
                        Case{"--arch llama --expert-layout split", "--experts"},
                        Case{"--arch qwen3moe --experts 4 --expert-ffn 100", "expert width"},
                        Case{"--arch mixtral", "--arch"}}) {
    const auto r = run("synth " + c.flags + " -o " + out);
    EXPECT_EQ(r.exit_code, 2) << c.flags << ": " << r.all();
    EXPECT_NE(r.err.find(c.named), std::string::npos) << c.flags << ": " << r.err;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hearth::model
