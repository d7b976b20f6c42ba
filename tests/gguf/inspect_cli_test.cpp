// The CLI on every committed corrupt file: exit code 1 and a message naming the file, never a
// crash (a signal) or a hang.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "support/subprocess.h"

namespace hearth {
namespace {

testing::CommandResult run(const std::string& cmd) {
  return testing::run_command(cmd);
}

TEST(InspectCli, EveryCommittedCorruptFileExitsOneWithAReason) {
  const std::filesystem::path dir = std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/gguf_bad";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const auto path = entry.path().string();
    const auto r = run(std::string("timeout 20 ") + HEARTH_BIN_PATH + " inspect '" + path + "'");
    EXPECT_EQ(r.exit_code, 1) << path << "\n" << r.all();
    EXPECT_NE(r.all().find(entry.path().filename().string()), std::string::npos) << r.all();
    ++count;
  }
  EXPECT_GE(count, 30);
}

TEST(InspectCli, ValidFileListsTensorsAndBadFlagsAreUsageErrors) {
  const std::string seed =
      std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/gguf_seeds/valid_tiny.gguf";
  auto r = run(std::string(HEARTH_BIN_PATH) + " inspect '" + seed + "'");
  EXPECT_EQ(r.exit_code, 0) << r.all();
  EXPECT_NE(r.all().find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.all().find("tokenizer.ggml.merges"), std::string::npos);
  r = run(std::string(HEARTH_BIN_PATH) + " inspect --bogus-flag x");
  EXPECT_EQ(r.exit_code, 2) << r.all();
  r = run(std::string(HEARTH_BIN_PATH) + " no-such-command");
  EXPECT_EQ(r.exit_code, 2) << r.all();
}

}  // namespace
}  // namespace hearth
