// The CLI on every committed corrupt file: exit code 1 and a message naming the file, never a
// crash (a signal) or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string output;
};

Result run(const std::string& cmd) {
  Result r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(InspectCli, EveryCommittedCorruptFileExitsOneWithAReason) {
  const std::filesystem::path dir = std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/gguf_bad";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto path = entry.path().string();
    const auto r = run(std::string("timeout 20 ") + HEARTH_BIN_PATH + " inspect '" + path + "'");
    EXPECT_EQ(r.exit_code, 1) << path << "\n" << r.output;
    EXPECT_NE(r.output.find(entry.path().filename().string()), std::string::npos) << r.output;
    ++count;
  }
  EXPECT_GE(count, 30);
}

TEST(InspectCli, ValidFileListsTensorsAndBadFlagsAreUsageErrors) {
  const std::string seed =
      std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/gguf_seeds/valid_tiny.gguf";
  auto r = run(std::string(HEARTH_BIN_PATH) + " inspect '" + seed + "'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.output.find("tokenizer.ggml.merges"), std::string::npos);
  r = run(std::string(HEARTH_BIN_PATH) + " inspect --bogus-flag x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run(std::string(HEARTH_BIN_PATH) + " no-such-command");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
