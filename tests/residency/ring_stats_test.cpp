// The residency metrics travel the ring: a real `hearth worker` process sends per-token
// Stats to a `hearth run --workers` head, whose --json summary and stderr table carry them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>
#include "support/scratch_dir.h"
#include "support/worker_process.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_ring_stats");
}

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

// A worker child with its own flags.
class Worker : public hearth::testing::WorkerProcess {
 public:
  Worker(const std::string& model, std::vector<std::string> extra)
      : WorkerProcess(with_model(model, std::move(extra))) {}

 private:
  static std::vector<std::string> with_model(const std::string& model,
                                             std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"-m", model});
    return extra;
  }
};

TEST(RingStats, HeadReportsEveryDevicesResidencyMetrics) {
  const auto dir = test_dir();
  const std::string model = (dir / "m.gguf").string();
  const std::string copy = (dir / "m1.gguf").string();
  shell(std::string(HEARTH_BIN_PATH) +
        " synth --layers 4 --dim 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 512 --type q8_0 "
        "-o " +
        model + " 2>&1");
  ASSERT_TRUE(fs::exists(model));
  fs::copy_file(model, copy, fs::copy_options::overwrite_existing);
  Worker w(copy, {"--release", "on", "--prefetch-method", "both"});
  ASSERT_FALSE(w.address().empty());
  const int n = 6;
  const std::string err = (dir / "head.err").string();
  // Plan 1,1 over 4 layers: k = 2 rounds, so both devices prefetch and the worker releases.
  const std::string out = shell(
      std::string(HEARTH_BIN_PATH) + " run -m " + model + " -p hi -n " + std::to_string(n) +
      " -t 1 --ignore-eos --json --plan 1,1 --release off --workers " + w.address() + " 2>" + err);
  const auto last = out.substr(out.rfind('\n', out.size() - 2) + 1);
  const auto j = nlohmann::json::parse(last);
  ASSERT_EQ(j["plan"]["k"], 2);
  ASSERT_TRUE(j["devices"].is_array());
  ASSERT_EQ(j["devices"].size(), 2u);
  for (const auto& d : j["devices"]) {
    SCOPED_TRACE(d.dump());
    // One step per eval: the prompt, then every generated token but the last.
    EXPECT_GE(d["steps"].get<int>(), n - 1);
    EXPECT_LE(d["steps"].get<int>(), n + 1);
    for (const char* key : {"compute_ms", "comm_ms", "wait_ms", "reload_bytes", "major_faults",
                            "prefetch_bytes", "release_bytes", "pressure_max", "pressure_mean"}) {
      ASSERT_TRUE(d.contains(key)) << key;
      const double v = d[key].get<double>();
      EXPECT_TRUE(std::isfinite(v) && v >= 0) << key << " = " << v;
    }
    EXPECT_GT(d["compute_ms"].get<double>(), 0.0);
    EXPECT_GT(d["prefetch_bytes"].get<double>(), 0.0);
    EXPECT_LE(d["pressure_max"].get<double>(), 1.0);
  }
  // Only the worker was told to release; the head was told not to.
  EXPECT_EQ(j["devices"][0]["release_bytes"].get<double>(), 0.0);
  EXPECT_FALSE(j["head_release"].get<bool>());
  EXPECT_GT(j["devices"][1]["wait_ms"].get<double>(), 0.0);
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("reload MB"), std::string::npos) << ss.str();
  fs::remove_all(dir);
}

}  // namespace
