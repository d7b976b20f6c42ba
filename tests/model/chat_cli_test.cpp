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

namespace hearth::model {
namespace {

struct Result {
  int exit_code = -1;
  std::string out;
};

Result chat(const std::string& flags, const std::string& input) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string in_path = dir / ("hearth_chat_in_" + std::to_string(getpid()));
  std::ofstream(in_path) << input;
  Result r;
  FILE* p = popen(
      (std::string(HEARTH_BIN_PATH) + " chat " + flags + " < " + in_path + " 2>&1").c_str(), "r");
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string model() {
  static const std::string path = [] {
    const auto p = (std::filesystem::temp_directory_path() /
                    ("hearth_chat_" + std::to_string(getpid()) + ".gguf"))
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

TEST(ChatCli, EndsOnEofAndRejectsUnknownTemplate) {
  auto r = chat("-m " + model() + " --temp 0 -n 4", "hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  r = chat("-m " + model() + " --chat-template nonesuch", "hello\n");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("nonesuch"), std::string::npos) << r.out;
  // A conversation that outgrows the context ends with a clear error, not a crash.
  r = chat("-m " + model() + " -c 40 --temp 0 -n 30", "hello\nmore\nmore\nmore\n");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("context"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hearth::model
