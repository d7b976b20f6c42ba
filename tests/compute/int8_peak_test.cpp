// The int8 peak probe (bench kernels' compute roofline for matmul): it must time real work.
// No speed is asserted here (figures belong to benchmarks); only that the probe measures
// something finite and consistent with the work it reports.
#include "hearth/compute/int8_peak.h"

#include <gtest/gtest.h>

#include <cmath>

#include "hearth/quant/type_traits.h"

namespace hearth::compute {
namespace {

// A probe that ran (`probed`) reports a finite, positive rate below 1e6 GMAC/s and names what it
// timed: a loop the compiler dropped would time ~0 s per run and report an absurd or infinite
// rate. One that did not run reports nothing.
void expect_measured(const Int8Peak& peak, bool probed) {
  if (probed) {
    EXPECT_GT(peak.gmacs, 0);
    EXPECT_TRUE(std::isfinite(peak.gmacs));
    EXPECT_LT(peak.gmacs, 1e6);
    EXPECT_STRNE(peak.idiom, "");
  } else {
    EXPECT_EQ(peak.gmacs, 0);
    EXPECT_STREQ(peak.idiom, "");
  }
}

TEST(Int8Peak, MeasuresAFiniteRateOnIsasWithAProbe) {
  ThreadPool pool(2);
  const quant::Isa isa = quant::active_isa();
  expect_measured(measure_int8_peak(pool, 0.01),
                  isa == quant::Isa::kAvx512 || isa == quant::Isa::kAvx2);
}

// The tile unit's probe runs only where AMX is usable.
TEST(Int8Peak, AmxProbeMeasuresWhereTilesAreUsable) {
  ThreadPool pool(2);
  expect_measured(measure_amx_peak(pool, 0.01), quant::amx_usable());
}

#if defined(__x86_64__)
TEST(Int8Peak, LoopsReportTheMultiplyAddsTheyIssue) {
  if (quant::amx_usable()) {
    EXPECT_EQ(detail::amx_tile_loop(100), 100u * 4 * 16 * 16 * 64);
  }
  if (quant::isa_supported(quant::Isa::kAvx512)) {
    EXPECT_EQ(detail::int8_dot_loop_avx512(1000), 1000u * 10 * 64);
  }
  if (quant::isa_supported(quant::Isa::kAvx2)) {
    EXPECT_EQ(detail::int8_dot_loop_avx2(1000), 1000u * 6 * 32);
  }
}
#endif

}  // namespace
}  // namespace hearth::compute
