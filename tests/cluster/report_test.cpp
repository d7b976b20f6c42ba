// bench/cluster/report.sh on hand-made results (bench/cluster/testdata/): the per-device
// disk, budget and pressure columns, the lower bound and the prediction table carry the
// right numbers, and figures a run lacks print as "-". Needs only bash and jq (no root).
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/scratch_dir.h"
#include "support/subprocess.h"

namespace hearth::testing {
namespace {

namespace fs = std::filesystem;

const std::string kBench = std::string(HEARTH_SOURCE_DIR) + "/bench/cluster";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The report is made once for all tests (report.sh takes seconds on a busy machine).
class ReportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    has_jq_ = run_command("command -v jq").exit_code == 0;
    if (!has_jq_) return;
    const fs::path out =
        hearth::testing::scratch_dir() / ("hearth_report_" + std::to_string(getpid()));
    fs::create_directories(out);
    const std::string data = kBench + "/testdata/";
    const auto r = run_command("bash '" + kBench + "/report.sh' --results '" + data +
                               "results.jsonl' --meta '" + data + "run.json' --testbed '" + data +
                               "testbed2.json' --out '" + out.string() + "'");
    made_ = r.exit_code == 0;
    log_ = r.all();
    report_ = slurp(out / "REPORT-fixture.md");
    fs::remove_all(out);
  }
  void SetUp() override {
    if (!has_jq_) GTEST_SKIP() << "needs jq";
    ASSERT_TRUE(made_) << log_;
    ASSERT_FALSE(report_.empty());
  }
  static inline bool has_jq_ = false, made_ = false;
  static inline std::string log_, report_;
};

TEST_F(ReportTest, PerDeviceRowsShowDiskBudgetExcessAndBothPressures) {
  // A: 30 MiB read per token (31.5 MB) against 20 MiB of excess: 1.5x, over 1.15x + 4 MiB.
  // Layers come from the plan entry of the same device ("head" for the head).
  EXPECT_NE(report_.find("| halda | A | 5 | 128 | 50 | 0 | 5 | 93 | 2 | 2 | 31.5 | 100 | 80 | 20 "
                         "| 1.5 **over** | 3.5 | 7.3 | 40 | 10 |"),
            std::string::npos)
      << report_;
  // B: within its budget, 1 MiB per token is under the 4 MiB allowance.
  EXPECT_NE(report_.find("| halda | B | 3 | 96 | 50 | 0 | 2 | 41 | 0 | 2 | 1 | 50 | 60 | 0 "
                         "| - (no excess) | 0 | 0 | 60 | 20 |"),
            std::string::npos)
      << report_;
  // A run from before these figures existed.
  EXPECT_NE(report_.find("| pipeline | A | 4 | 128 | 50 | 0 | 50 | - | 1 | 2 | - | - | - | - | - "
                         "| - | - | 90 | 100 |"),
            std::string::npos)
      << report_;
}

TEST_F(ReportTest, LowerBoundIsTheLargerOfDiskAndComputeSum) {
  // halda: excess 20 MiB over 100 + 300 MB/s = 52.4 ms; compute 40 + 60 = 100 ms less the
  // 7.25 ms device A waited for streamed weights = 92.75 ms; 150 / 92.75.
  EXPECT_NE(report_.find("| m1 | halda | 20 | 400 | 52.4 | 92.8 | 92.8 | 150 | 1.62 |"),
            std::string::npos)
      << report_;
  // halda-prefetch has budgets but no assigned bytes: file 200 MiB - (80 + 60) MiB = 60 MiB.
  EXPECT_NE(report_.find("| m1 | halda-prefetch | 60 | 400 | 157.3 | 50 | 157.3 | 200 | 1.27 |"),
            std::string::npos)
      << report_;
  // Only Halda runs, and not the failed one.
  EXPECT_EQ(report_.find("| m1 | pipeline | 0 |"), std::string::npos);
  EXPECT_EQ(report_.find("| m1 | halda-paper | -"), std::string::npos) << report_;
}

TEST_F(ReportTest, PredictionUsesTheTopLevelFigureAndNamesTheCostModel) {
  EXPECT_NE(report_.find("| m1 | halda | hearth | 120 (256) | 118 | 150 | 1.27 |"),
            std::string::npos)
      << report_;
  EXPECT_NE(report_.find("| m1 | halda-prefetch | - | 100 (256) | 99 | 200 | 2.02 |"),
            std::string::npos)
      << report_;
  EXPECT_NE(report_.find("| m1 | halda-paper | failed |"), std::string::npos) << report_;
}

}  // namespace
}  // namespace hearth::testing
