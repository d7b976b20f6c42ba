// `hearth chat` driven through stdin as a script would drive it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "hearth/model/synth.h"
#include "support/scratch_dir.h"
#include "support/subprocess.h"
#include "support/synth_model.h"

namespace hearth::model {
namespace {

testing::CommandResult chat(const std::string& flags, const std::string& input) {
  return testing::run_hearth("chat " + flags, input);
}

std::string model() {
  static const std::string path = [] {
    const auto p =
        (hearth::testing::scratch_dir() / ("hearth_chat_" + std::to_string(getpid()) + ".gguf"))
            .string();
    SynthOptions opt;
    opt.hp.arch = Arch::kQwen2;
    opt.hp.n_layers = 2;
    opt.hp.dim = 256;
    opt.hp.n_heads = 4;
    opt.hp.n_kv_heads = 2;
    opt.hp.head_dim = 64;
    opt.hp.ffn = 512;
    opt.hp.vocab = 600;
    opt.hp.ctx_train = 512;
    opt.hp.qkv_bias = true;
    opt.types = parse_type_recipe("q8_0");
    write_synthetic_model(opt, p);
    return p;
  }();
  return path;
}

TEST(ChatCli, TwoTurnsThenExit) {
  const auto r = chat("-m " + model() + " --temp 0 -n 6 --system 'be brief'",
                      "hello there\nthe fire\n/exit\nignored\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  // Two replies, one per line (a random model may print odd text, but two newlines at least).
  EXPECT_GE(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
}

// Drafting changes the speed, not the replies: three turns with the model drafting for itself
// and with prompt lookup print what plain decoding prints; a draft model of another
// vocabulary is refused naming its file.
TEST(ChatCli, DraftingGivesThePlainReplies) {
  const std::string turns = "hello there\nthe fire in the hearth\nthe fire in the hearth\n";
  const std::string flags = "-m " + model() + " --temp 0 -n 12";
  const auto plain = chat(flags, turns);
  ASSERT_EQ(plain.exit_code, 0) << plain.all();
  for (const std::string& draft :
       {"-md " + model() + " --draft-p-min 0", std::string("--draft-lookup --draft-ngram-min 1")}) {
    const auto r = chat(flags + " " + draft, turns);
    ASSERT_EQ(r.exit_code, 0) << draft << "\n" << r.all();
    EXPECT_EQ(r.out, plain.out) << draft;
  }
  const auto other = testing::write_model(
      (hearth::testing::scratch_dir() / ("hearth_chat_other_" + std::to_string(getpid()) + ".gguf"))
          .string(),
      {1, 128, 2, 1, 256, 1200});
  const auto bad = chat(flags + " -md " + other, turns);
  EXPECT_EQ(bad.exit_code, 2) << bad.all();
  EXPECT_NE(bad.all().find(other), std::string::npos) << bad.all();
  EXPECT_NE(bad.all().find("vocabulary"), std::string::npos) << bad.all();
  std::filesystem::remove(other);
  // Flags that contradict each other are refused before anything loads.
  EXPECT_EQ(chat(flags + " --draft-lookup -md " + model(), turns).exit_code, 2);
  EXPECT_EQ(chat(flags + " --draft-lookup --draft-min 5 --draft-max 2", turns).exit_code, 2);
}

TEST(ChatCli, EndsOnEofAndRejectsUnknownTemplate) {
  auto r = chat("-m " + model() + " --temp 0 -n 4", "hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = chat("-m " + model() + " --chat-template nonesuch", "hello\n");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.all().find("nonesuch"), std::string::npos) << r.out;
  // A conversation that outgrows the context ends with a clear error, not a crash.
  r = chat("-m " + model() + " -c 40 --temp 0 -n 30", "hello\nmore\nmore\nmore\n");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.all().find("context"), std::string::npos) << r.out;
}

// --chat-template-kwargs: a JSON object of more template variables; anything else, or a
// variable hearth sets itself, exits 2 naming the flag.
TEST(ChatCli, TemplateKwargs) {
  auto r =
      chat("-m " + model() + " --temp 0 -n 3 --chat-template-kwargs '{\"enable_thinking\": false}'",
           "hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.all();
  for (const char* bad : {"'[1]'", "'{not json'", "'{\"messages\": []}'"}) {
    r = chat("-m " + model() + " --chat-template-kwargs " + bad, "hello\n");
    EXPECT_EQ(r.exit_code, 2) << bad << r.all();
    EXPECT_NE(r.all().find("--chat-template-kwargs"), std::string::npos) << r.all();
  }
}

}  // namespace
}  // namespace hearth::model
