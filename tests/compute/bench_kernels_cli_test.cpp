// `hearth bench kernels` shape and token flags: a real process, bad values refused with exit 2
// and a message naming the value, a good shape measured in both layouts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/subprocess.h"

namespace hearth::compute {
namespace {

TEST(BenchKernelsCli, BadShapesAreRefused) {
  for (const std::string shape :
       {"12x256", "4096x1000", "4096x", "x4096", "ax256", "16x256x3", "1048576x1048576",
        "-16x256", "99999999x256"}) {
    const auto r = testing::run_hearth("bench kernels --shapes " + shape + " --threads 1");
    EXPECT_EQ(r.exit_code, 2) << shape;
    EXPECT_NE(r.err.find("bad shape '" + shape + "'"), std::string::npos) << shape << ": " << r.err;
  }
}

TEST(BenchKernelsCli, BadMatmulTokenCountsAreRefused) {
  for (const std::string n : {"-1", "4097"}) {
    const auto r = testing::run_hearth("bench kernels --matmul-tokens " + n + " --threads 1");
    EXPECT_EQ(r.exit_code, 2) << n;
    EXPECT_NE(r.err.find("bad matmul token count " + n), std::string::npos) << r.err;
  }
}

TEST(BenchKernelsCli, ShapesReplaceTheDefaultsAndZeroTokensSkipMatmul) {
  const auto r = testing::run_hearth(
      "bench kernels --quick --threads 1 --types q8_0 --shapes 256x512,32x1024 --matmul-tokens 0 "
      "--reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = testing::last_json_line(r.out);
  int matvec_rows = 0;
  for (const auto& row : j.at("rows")) {
    ASSERT_EQ(row.at("op"), "matvec") << row.dump();
    const auto shape = row.at("shape");
    EXPECT_TRUE(shape == nlohmann::json({256, 512}) || shape == nlohmann::json({32, 1024}))
        << row.dump();
    EXPECT_GT(row.at("gbps").get<double>(), 0) << row.dump();
    ++matvec_rows;
  }
  EXPECT_EQ(matvec_rows, 4);  // two shapes, GGUF and rows16 layouts
}

TEST(BenchKernelsCli, StreamTuningFollowsTheEnvironmentAndRefusesUnknownNames) {
  const std::string args =
      "bench kernels --quick --threads 1 --types q4_k --shapes 32x256 "
      "--matmul-tokens 0 --reps 1 --json";
  for (const std::string name : {"zen4", "zen5"}) {
    const auto r = testing::run_command("HEARTH_STREAM_TUNING=" + name + " " +
                                        std::string(HEARTH_BIN_PATH) + " " + args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(testing::last_json_line(r.out).at("stream_tuning"), name);
    EXPECT_NE(r.out.find("stream tuning " + name), std::string::npos) << r.out;
  }
  const auto r = testing::run_command("HEARTH_STREAM_TUNING=zen9 " + std::string(HEARTH_BIN_PATH) +
                                      " " + args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("HEARTH_STREAM_TUNING=zen9"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hearth::compute
