// `hearth bench kernels` shape and token flags: a real process, bad values refused with exit 2
// and a message naming the value, a good shape measured in both layouts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "hearth/quant/type_traits.h"

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
      "bench kernels --quick --threads 1,2 --types q8_0 --shapes 256x512,16x1024 --matmul-tokens 0 "
      "--reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = testing::last_json_line(r.out);
  int matvec_rows = 0;
  for (const auto& row : j.at("rows")) {
    ASSERT_EQ(row.at("op"), "matvec") << row.dump();
    const auto shape = row.at("shape");
    EXPECT_TRUE(shape == nlohmann::json({256, 512}) || shape == nlohmann::json({16, 1024}))
        << row.dump();
    EXPECT_GT(row.at("gbps").get<double>(), 0) << row.dump();
    // The kernel on weights in cache, beside the read bandwidth.
    EXPECT_GT(row.at("cached_gbps").get<double>(), 0) << row.dump();
    EXPECT_GT(row.at("cached_ratio").get<double>(), 0) << row.dump();
    ++matvec_rows;
  }
  EXPECT_EQ(matvec_rows, 8);  // two shapes, GGUF and rows16 layouts, one and two threads
}

// Each rows16 matmul row carries the kernel alone beside the matmul (the same int8 peak
// measures both); GGUF-layout rows, which have no rows16 kernel of their own, do not.
TEST(BenchKernelsCli, Rows16MatmulRowsCarryTheKernelAlone) {
  const auto r = testing::run_hearth(
      "bench kernels --threads 1 --types q4_0 --shapes 32x256 --matmul-tokens 16 --reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = testing::last_json_line(r.out);
  if (j.at("int8_peak_gmacs_by_threads").at("1").get<double>() <= 0) {
    GTEST_SKIP() << "no int8 peak on this ISA, so no fractions";
  }
  int rows16 = 0, gguf = 0;
  for (const auto& row : j.at("rows")) {
    if (row.at("op") != "matmul") continue;
    EXPECT_GT(row.at("peak_fraction").get<double>(), 0) << row.dump();
    if (row.at("layout") == "rows16") {
      ++rows16;
      const double kernel = row.at("kernel_peak_fraction").get<double>();
      EXPECT_GT(kernel, 0) << row.dump();
      EXPECT_LT(kernel, 2) << row.dump();  // a fraction of a peak measured in the same run
    } else {
      ++gguf;
      EXPECT_FALSE(row.contains("kernel_peak_fraction")) << row.dump();
    }
  }
  EXPECT_EQ(rows16, 1);
  EXPECT_EQ(gguf, 1);
}

TEST(BenchKernelsCli, StreamTuningFollowsTheEnvironmentAndRefusesUnknownNames) {
  const std::string args =
      "bench kernels --quick --threads 1 --types q4_k --shapes 32x256 "
      "--matmul-tokens 0 --reps 1 --json";
  for (const std::string name : {"zen4", "zen5", "spr"}) {
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

// Whether matmul runs AMX tiles in this process: usable, and beside the AVX-512 kernels.
bool tiles_here() {
  return quant::amx_usable() && quant::active_isa() == quant::Isa::kAvx512;
}

// The AMX tiles run where this CPU has them ("on"; "none" where not) unless HEARTH_AMX=0 turns
// them off ("off"), as does forcing an ISA other than AVX-512 (the tiles sit beside its kernels);
// HEARTH_AMX=1 is the default said aloud, anything else is refused.
TEST(BenchKernelsCli, AmxFollowsTheEnvironmentAndRefusesOtherValues) {
  const std::string args =
      " bench kernels --quick --threads 1 --types q8_0 --shapes 32x256 --matmul-tokens 0 "
      "--reps 1 --json";
  const std::string present = quant::amx_usable() ? "off" : "none";
  const std::string on = tiles_here() ? "on" : present;
  std::vector<std::pair<std::string, std::string>> cases = {
      {"HEARTH_AMX=0 ", present}, {"HEARTH_AMX=1 ", on}, {"env -u HEARTH_AMX ", on}};
  if (quant::isa_supported(quant::Isa::kAvx2)) cases.emplace_back("HEARTH_ISA=avx2 ", present);
  for (const auto& [env, want] : cases) {
    std::string command = env;
    command += HEARTH_BIN_PATH;
    command += args;
    const auto r = testing::run_command(command);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(testing::last_json_line(r.out).at("amx"), want) << env;
    EXPECT_NE(r.out.find("amx " + want), std::string::npos) << r.out;
  }
  const auto r = testing::run_command("HEARTH_AMX=yes " + std::string(HEARTH_BIN_PATH) + args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("HEARTH_AMX=yes: expected 0 or 1"), std::string::npos) << r.err;
}

// Where matmul runs a type on AMX tiles, its rows16 matmul rows time the VNNI pair kernel alone
// beside the tile kernel alone (the AMX bar, checked at run time), and the header has the tile
// unit's own rate. With the tiles off (HEARTH_AMX=0), or none here, no row claims a comparison.
TEST(BenchKernelsCli, AmxRowsSetTheTilesBesideTheVnniKernel) {
  const std::string args =
      " bench kernels --threads 1 --types q4_k --shapes 32x256 --matmul-tokens 16 --reps 1 --json";
  for (const bool tiles : {true, false}) {
    std::string command = tiles ? "env -u HEARTH_AMX " : "HEARTH_AMX=0 ";
    command += HEARTH_BIN_PATH;
    command += args;
    const auto r = testing::run_command(command);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = testing::last_json_line(r.out);
    const bool on = tiles && tiles_here();
    EXPECT_EQ(j.at("amx"), on ? "on" : (quant::amx_usable() ? "off" : "none"));
    // The unit's own rate is measured wherever it is usable, on or off.
    EXPECT_EQ(j.contains("amx_peak_gmacs_by_threads"), quant::amx_usable()) << j.dump();
    if (quant::amx_usable()) {
      EXPECT_GT(j.at("amx_peak_gmacs_by_threads").at("1").get<double>(), 0);
      EXPECT_NE(r.out.find("AMX tile peak, 1 thread(s): "), std::string::npos) << r.out;
    }
    int compared = 0;
    for (const auto& row : j.at("rows")) {
      if (row.at("op") != "matmul") continue;
      const bool has = row.contains("amx_over_vnni");
      EXPECT_EQ(row.contains("vnni_kernel_peak_fraction"), has) << row.dump();
      if (!has) continue;
      ++compared;
      EXPECT_EQ(row.at("layout"), "rows16") << row.dump();
      const double vnni = row.at("vnni_kernel_peak_fraction").get<double>();
      EXPECT_GT(vnni, 0) << row.dump();
      EXPECT_LT(vnni, 2) << row.dump();
      EXPECT_NEAR(row.at("amx_over_vnni").get<double>(),
                  row.at("kernel_peak_fraction").get<double>() / vnni, 1e-9)
          << row.dump();
    }
    EXPECT_EQ(compared, on ? 1 : 0) << r.out;
  }
}

}  // namespace
}  // namespace hearth::compute
