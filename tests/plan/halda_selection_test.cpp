// Halda's device selection under the overlap model: the knapsack search (knapsack_search.h)
// against exhaustive search over every subset, against the MILP on larger rings, and the
// promise that more candidate devices never predict a slower token.
#include <gtest/gtest.h>

#include <cstdio>

#include "fixtures.h"
#include "hearth/base/error.h"
#include "hearth/plan/baselines.h"
#include "hearth/plan/fleet.h"
#include "hearth/plan/halda.h"
#include "hearth/plan/knapsack_search.h"
#include "hearth/profile/device_profile.h"

namespace hearth::plan {
namespace {

using namespace test;

std::vector<profile::DeviceProfile> table3() {
  return profile::load_devices_file(std::string(HEARTH_SOURCE_DIR) +
                                    "/bench/testbeds/paper-table3.json")
      .devices;
}

Problem fleet_problem(size_t devices, uint64_t seed, std::string_view preset = "llama3-70b") {
  Problem p;
  p.devices = jittered_fleet(table3(), devices, seed);
  p.model = profiler::profile_preset(preset, 1.0, "q4_k_m");
  return p;
}

bool same(double a, double b, double rel) {
  return std::abs(a - b) <= rel * std::max(a, b);
}

// Halda and exhaustive search (every subset that keeps the head, devices may drop) on one
// instance: both feasible or neither, and the same TPOT to 1e-9.
struct Compared {
  Plan h, opt;
  bool equal = false;
};
Compared search_and_exhaustive(const Problem& p, int instance) {
  ExhaustiveOptions eo;
  eo.allow_drop = true;
  Compared r{halda(p), exhaustive(p, eo)};
  EXPECT_EQ(r.h.feasible, r.opt.feasible) << "instance " << instance << ": " << r.h.reason;
  if (!r.h.feasible || !r.opt.feasible) {
    r.h.feasible = false;
    return r;
  }
  EXPECT_GE(r.h.predicted_tpot_ms, r.opt.predicted_tpot_ms * (1 - 1e-9)) << "instance " << instance;
  r.equal = same(r.h.predicted_tpot_ms, r.opt.predicted_tpot_ms, 1e-9);
  EXPECT_TRUE(r.equal) << "instance " << instance << " L=" << p.model.n_layers
                       << " M=" << p.devices.size() << ": " << r.h.predicted_tpot_ms << " vs "
                       << r.opt.predicted_tpot_ms;
  return r;
}

// Every subset that keeps the head, every w with W dividing L, every n: the search reaches the
// same optimum under both cost models, and under the overlap model with and without streaming.
TEST(HaldaSelection, SearchEqualsExhaustiveOverEverySubset) {
  struct Case {
    CostModel model;
    bool streaming;
  };
  for (const Case c : {Case{CostModel::kOverlap, true}, Case{CostModel::kOverlap, false},
                       Case{CostModel::kPaper, true}}) {
    std::mt19937_64 rng(41 + c.streaming + 2 * (c.model == CostModel::kPaper));
    int feasible = 0, equal = 0, dropped = 0, head_zero = 0;
    for (int i = 0; i < 240; ++i) {
      const uint32_t L = std::array<uint32_t, 3>{4, 6, 8}[i % 3];
      const size_t M = 1 + (i / 3) % 4;
      auto p = random_problem(rng, L, M, c.model);
      p.options.streaming = c.streaming;
      const Compared r = search_and_exhaustive(p, i);
      if (!r.h.feasible) continue;
      ++feasible;
      equal += r.equal;
      const Plan& opt = r.opt;
      for (const auto& d : opt.devices) dropped += d.dropped;
      head_zero += opt.devices[0].w == 0;
    }
    std::printf(
        "%s model, streaming %d: %d feasible, search = exhaustive optimum on %d (optima drop %d "
        "devices, %d have a head without layers)\n",
        std::string(cost_model_name(c.model)).c_str(), c.streaming, feasible, equal, dropped,
        head_zero);
    EXPECT_EQ(equal, feasible);
    EXPECT_GT(feasible, 150);
    EXPECT_GT(dropped, 20);
    if (c.model == CostModel::kOverlap) {
      EXPECT_GT(head_zero, 20);
    }
  }
}

// The same on a mixture of experts (Qwen 3 30B-A3B's shape), whose experts leave memory first
// and are read by their share: the search reaches the exhaustive optimum, and the MILP, which
// does not model them, refuses the model.
TEST(HaldaSelection, SearchEqualsExhaustiveOnAMixtureOfExperts) {
  for (const bool streaming : {true, false}) {
    std::mt19937_64 rng(77 + streaming);
    int feasible = 0, equal = 0, expert_reads = 0;
    for (int i = 0; i < 120; ++i) {
      const uint32_t L = std::array<uint32_t, 3>{4, 6, 8}[i % 3];
      const size_t M = 1 + (i / 3) % 4;
      auto p = random_problem(rng, L, M, CostModel::kOverlap, "qwen3-30b-a3b");
      p.options.streaming = streaming;
      const Compared r = search_and_exhaustive(p, i);
      if (!r.h.feasible) continue;
      ++feasible;
      equal += r.equal;
      for (const auto& d : r.h.devices) expert_reads += d.cost.expert_read_bytes > 0;
    }
    std::printf(
        "mixture, streaming %d: %d feasible, search = exhaustive on %d, %d devices read "
        "experts\n",
        streaming, feasible, equal, expert_reads);
    EXPECT_EQ(equal, feasible);
    EXPECT_GT(feasible, 60);
    EXPECT_GT(expert_reads, 10);
  }
  std::mt19937_64 rng(5);
  auto p = random_problem(rng, 8, 3, CostModel::kOverlap, "qwen3-30b-a3b");
  HaldaOptions milp;
  milp.milp = true;
  EXPECT_THROW(halda(p, milp), UsageError);
}

// On rings too large for exhaustive search, the search and the MILP (CBC, with a binary per
// device for taking part) agree: two exact methods of different kinds.
TEST(HaldaSelection, SearchEqualsTheMilpOnLargerRings) {
  HaldaOptions milp;
  milp.milp = true;
  int compared = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const auto p = fleet_problem(4 + seed % 5, seed);
    const auto a = halda(p), b = halda(p, milp);
    ASSERT_EQ(a.feasible, b.feasible) << "fleet seed " << seed;
    EXPECT_TRUE(same(a.predicted_tpot_ms, b.predicted_tpot_ms, 1e-7))
        << "fleet seed " << seed << ": " << a.predicted_tpot_ms << " vs " << b.predicted_tpot_ms;
    ++compared;
  }
  std::mt19937_64 rng(43);
  for (int i = 0; i < 40; ++i) {
    auto p = random_problem(rng, std::array<uint32_t, 3>{8, 12, 16}[i % 3], 5 + i % 4,
                            CostModel::kOverlap);
    const auto a = halda(p), b = halda(p, milp);
    ASSERT_EQ(a.feasible, b.feasible) << "instance " << i;
    if (!a.feasible) continue;
    EXPECT_TRUE(same(a.predicted_tpot_ms, b.predicted_tpot_ms, 1e-7))
        << "instance " << i << ": " << a.predicted_tpot_ms << " vs " << b.predicted_tpot_ms;
    ++compared;
  }
  EXPECT_GT(compared, 40);
}

// A fleet of a seed holds every smaller fleet of that seed as its first devices; adding
// candidates must never raise the predicted TPOT (200 seeds, 2 to 32 devices, both models).
TEST(HaldaSelection, MoreDevicesNeverPredictASlowerToken) {
  for (CostModel cm : {CostModel::kOverlap, CostModel::kPaper}) {
    int pairs = 0, faster = 0;
    for (uint64_t seed = 0; seed < 200; ++seed) {
      double prev = 0;
      for (size_t M : {2, 4, 8, 16, 32}) {
        auto p = fleet_problem(M, 5000 + seed);
        p.options.model = cm;
        const auto h = halda(p);
        ASSERT_TRUE(h.feasible) << "seed " << seed << " M " << M << ": " << h.reason;
        if (prev > 0) {
          ++pairs;
          EXPECT_LE(h.predicted_tpot_ms, prev * (1 + 1e-9)) << "seed " << seed << " M " << M;
          faster += h.predicted_tpot_ms < prev * (1 - 1e-9);
        }
        prev = h.predicted_tpot_ms;
      }
    }
    std::printf("%s model, nested fleets: %d superset/subset pairs, the superset faster in %d\n",
                std::string(cost_model_name(cm)).c_str(), pairs, faster);
    EXPECT_GT(faster, pairs / 4);  // the extra devices are used, not just tolerated
  }
}

// The head need not run layers: an 8B model on the paper's D1-D4, where one device holds it all,
// is not forced to put a layer on the head.
TEST(HaldaSelection, TheHeadMayHoldNoLayers) {
  Problem p;
  p.devices = profile::load_devices_file(std::string(HEARTH_SOURCE_DIR) +
                                         "/bench/testbeds/paper-table3-d1-d4.json")
                  .devices;
  p.model = profiler::profile_preset("llama3-8b", 1.0, "q4_k_m");
  const auto h = halda(p);
  ASSERT_TRUE(h.feasible) << h.reason;
  // No plan that puts the whole model on one worker, behind a bare head, is faster.
  const size_t N = p.devices.size();
  for (size_t m = 1; m < N; ++m) {
    for (uint32_t n = 0; n <= p.model.n_layers; n += p.model.n_layers) {
      std::vector<uint32_t> w(N, 0), gpu(N, 0);
      w[m] = p.model.n_layers;
      gpu[m] = p.devices[m].has_gpu() ? n : 0;
      const auto pred = predict(p, w, gpu);
      if (pred.feasible) {
        EXPECT_LE(h.predicted_tpot_ms, pred.tpot_s * 1e3 * (1 + 1e-9));
      }
    }
  }
}

}  // namespace
}  // namespace hearth::plan
