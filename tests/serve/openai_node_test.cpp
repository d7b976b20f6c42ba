// The official OpenAI Node SDK (npm `openai`) against a real `hearth serve`: one
// non-streaming and one streaming chat completion (tests/node/openai_sdk_check.mjs).
// The SDK is installed into tests/node/node_modules on first run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "serve/serve_process.h"
#include "support/subprocess.h"

namespace hearth::serve::testing {
namespace {

// A shell command's exit status and merged output.
std::pair<int, std::string> run(const std::string& cmd) {
  const auto r = hearth::testing::run_command(cmd + " 2>&1");
  return {r.exit_code, r.out};
}

// tests/node with the SDK installed (on first run).
std::string sdk_dir() {
  const std::string dir = std::string(HEARTH_SOURCE_DIR) + "/tests/node";
  // Tests run in parallel: one installs while the others wait on the lock.
  const auto [rc, out] = run("flock '" + dir + "/package.json' sh -c \"test -f '" + dir +
                             "/node_modules/openai/package.json' || npm install --prefix '" + dir +
                             "' --no-audit --no-fund\"");
  EXPECT_EQ(rc, 0) << "npm install failed:\n" << out;
  return dir;
}

TEST(OpenAiNodeSdk, ChatCompletionPlainAndStreamed) {
  if (run("command -v node && command -v npm").first != 0) GTEST_SKIP() << "node/npm not installed";
  const std::string dir = sdk_dir();
  ASSERT_FALSE(::testing::Test::HasFailure());
  ServeProc server({"--api-key", "node-key"});
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1";
  const auto [rc, out] =
      run("node '" + dir + "/openai_sdk_check.mjs' " + base + " node-key serve_tiny");
  EXPECT_EQ(rc, 0) << out << "\n(server log: " << server.log() << ")";
  EXPECT_NE(out.find("openai sdk check: ok"), std::string::npos) << out;
}

// Tool calls for both template families: the real Llama 3.1 and Qwen 2.5 templates.
TEST(OpenAiNodeSdk, ToolCallsForBothTemplateFamilies) {
  if (run("command -v node && command -v npm").first != 0) GTEST_SKIP() << "node/npm not installed";
  const std::string dir = sdk_dir();
  ASSERT_FALSE(::testing::Test::HasFailure());
  std::ifstream in(std::string(HEARTH_SOURCE_DIR) + "/tests/fixtures/text/chat_templates.json");
  const auto fx = nlohmann::json::parse(in);
  for (const std::string family : {"llama3.1", "qwen2.5"}) {
    const std::string path = (test_dir() / ("node_" + family + ".jinja")).string();
    std::ofstream(path) << fx.at("templates").at(family).get<std::string>();
    ServeProc server({"--api-key", "node-key", "--chat-template-file", path, "-c", "2048"});
    const std::string base = "http://127.0.0.1:" + std::to_string(server.port()) + "/v1";
    const auto [rc, out] =
        run("node '" + dir + "/openai_sdk_tools.mjs' " + base + " node-key serve_tiny");
    EXPECT_EQ(rc, 0) << family << ": " << out << "\n(server log: " << server.log() << ")";
    EXPECT_NE(out.find("openai sdk tools: ok"), std::string::npos) << family << ": " << out;
  }
}

}  // namespace
}  // namespace hearth::serve::testing
