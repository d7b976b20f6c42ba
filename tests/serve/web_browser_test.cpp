// The pages in a real headless browser (Debian's chromium driven by puppeteer-core,
// tests/web/browser_check.mjs): the chat page streams, stops and keeps its conversation; the
// cluster page shows every device of a 3-process ring and its numbers move while a request
// runs. HEARTH_WEB_SHOTS=DIR keeps desktop and phone screenshots (docs/images/ holds them).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve/serve_process.h"
#include "support/subprocess.h"
#include "support/worker_process.h"

namespace hearth::serve::testing {
namespace {

// A shell command's exit status and merged output.
std::pair<int, std::string> shell(const std::string& cmd) {
  const auto r = hearth::testing::run_command(cmd + " 2>&1");
  return {r.exit_code, r.out};
}

// tests/web with puppeteer-core installed from its lockfile (on first run).
std::string web_dir() {
  const std::string dir = std::string(HEARTH_SOURCE_DIR) + "/tests/web";
  // Tests run in parallel: one installs while the others wait on the lock.
  const auto [rc, out] = shell("flock '" + dir + "/package.json' sh -c \"test -f '" + dir +
                               "/node_modules/puppeteer-core/package.json' || npm ci --prefix '" +
                               dir + "' --no-audit --no-fund\"");
  EXPECT_EQ(rc, 0) << "npm ci failed:\n" << out;
  return dir;
}

bool have_browser() {
  return shell("command -v node && command -v npm && test -x /usr/bin/chromium").first == 0;
}

std::string shots() {
  const char* d = std::getenv("HEARTH_WEB_SHOTS");
  return d ? std::string(" '") + d + "'" : std::string();
}

TEST(WebBrowser, ChatStreamsStopsAndKeepsTheConversation) {
  if (!have_browser()) GTEST_SKIP() << "node, npm or /usr/bin/chromium not installed";
  const std::string dir = web_dir();
  ASSERT_FALSE(::testing::Test::HasFailure());
  ServeProc server({"--api-key", "browser-key", "-c", "32768"});
  const std::string base = "http://127.0.0.1:" + std::to_string(server.port());
  const auto [rc, out] =
      shell("node '" + dir + "/browser_check.mjs' chat " + base + " browser-key" + shots());
  EXPECT_EQ(rc, 0) << out << "\n(server log: " << server.log() << ")";
  EXPECT_NE(out.find("browser check (chat): ok"), std::string::npos) << out;
}

TEST(WebBrowser, ClusterShowsEveryDeviceOfARingLive) {
  if (!have_browser()) GTEST_SKIP() << "node, npm or /usr/bin/chromium not installed";
  const std::string dir = web_dir();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string model = write_tiny_model(4);
  hearth::testing::WorkerProcess w1({"-m", model}), w2({"-m", model});
  ASSERT_FALSE(w1.address().empty()) << w1.log();
  ASSERT_FALSE(w2.address().empty()) << w2.log();
  ServeProc head({"--api-key", "browser-key", "-c", "2048", "--workers",
                  w1.address() + "," + w2.address(), "--plan", "2,1,1"},
                 model);
  const std::string base = "http://127.0.0.1:" + std::to_string(head.port());
  const auto [rc, out] =
      shell("node '" + dir + "/browser_check.mjs' cluster " + base + " browser-key 3" + shots());
  EXPECT_EQ(rc, 0) << out << "\n(head log: " << head.log() << ")";
  EXPECT_NE(out.find("browser check (cluster): ok"), std::string::npos) << out;
}

}  // namespace
}  // namespace hearth::serve::testing
