// The paper's cost model against hand-computed cases, one per device set of paper A.3
// (M1-M4), with round-number devices (fixtures.h) so every term can be checked by hand. The
// overlap model is in overlap_model_test.cpp.
#include <gtest/gtest.h>

#include "fixtures.h"
#include "hearth/base/error.h"
#include "hearth/plan/cost_model.h"

namespace hearth::plan {
namespace {

using namespace test;

// Two devices, L = 4, w = (2, 2), ctx 1000: b' = 1e9 + 1000 * 1000 = 1.001e9 bytes per layer.
Problem two_devices(DeviceProfile other) {
  Problem p;
  p.model = round_model(4);
  p.options.ctx = 1000;
  p.options.model = CostModel::kPaper;
  auto head = cpu_device("H", 1.5e9);
  head.head = true;
  p.devices = {head, std::move(other)};
  return p;
}

TEST(CostModel, HeadOverloadedOnLinuxIsSetM3AndOtherFitsIsM4) {
  auto p = two_devices(cpu_device("O", 8e9));
  const auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.W, 4u);
  EXPECT_EQ(r.k, 1u);
  const auto& h = r.devices[0];
  // compute: 2 layers * 1e9 FLOP / 1e11 FLOP/s + output 2e8 / 1e11
  EXPECT_NEAR(h.compute_s, 0.02 + 0.002, 1e-12);
  // memory: 2 KV appends of 1e-5 s + 2 * 1.001e9 B / 1e10 B/s + (b_i/V + b_o) / 1e10
  EXPECT_NEAR(h.memory_s, 2e-5 + 0.2002 + (1e5 + 2e8) / 1e10, 1e-12);
  // disk: need 2 * 1.001e9 + 1e5 + 2e8 + c_cpu 1e7 = 2.2121e9 > 1.5e9 available, sequential
  // reads at 1e9 B/s, plus the embedding-row lookup 1e5 B
  EXPECT_TRUE(h.overloaded);
  EXPECT_NEAR(h.disk_s, (2.2121e9 - 1.5e9) / 1e9 + 1e5 / 1e9, 1e-12);
  // comm: one window, rtt/2 = 2 ms + 4000 B / 1e6 B/s = 4 ms
  EXPECT_NEAR(h.comm_s, 0.006, 1e-12);
  const auto& o = r.devices[1];
  EXPECT_FALSE(o.overloaded);
  EXPECT_NEAR(o.compute_s, 0.02, 1e-12);
  EXPECT_NEAR(o.memory_s, 2e-5 + 0.2002, 1e-12);
  EXPECT_EQ(o.disk_s, 0.0);
  EXPECT_NEAR(o.comm_s, 0.006, 1e-12);
  EXPECT_NEAR(r.tpot_s, 0.022 + 0.22023 + 0.7122 + 0.006 + 0.02 + 0.20022 + 0.006, 1e-9);
}

TEST(CostModel, MacWithoutMetalOverloadedIsSetM1AndUsesRandomReads) {
  auto o = cpu_device("O", 1.5e9);
  o.os = OsClass::kMac;
  o.disk_random_read_bps = 5e8;
  auto p = two_devices(o);
  const auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  // need 2 * 1.001e9 + c_cpu 1e7 = 2.012e9; overflow 5.12e8 at the random-read 5e8 B/s
  EXPECT_TRUE(r.devices[1].overloaded);
  EXPECT_NEAR(r.devices[1].disk_s, 5.12e8 / 5e8, 1e-12);
}

TEST(CostModel, MacWithMetalOverloadedIsSetM2AndReloadsEveryWeight) {
  auto o = cpu_device("O", 8e9);
  add_gpu(o, GpuKind::kMetal, 1.5e9);  // the Metal working set is the bound, not RAM
  o.disk_random_read_bps = 5e8;
  auto p = two_devices(o);
  const auto r = predict(p, {2, 2}, {0, 1});
  ASSERT_TRUE(r.feasible) << r.reason;
  const auto& d = r.devices[1];
  // need l b' + c_cpu + c_gpu = 2.002e9 + 3e7 > 1.5e9: Metal drops and reloads l * b = 2e9 B
  EXPECT_TRUE(d.overloaded);
  EXPECT_NEAR(d.disk_s, 2e9 / 5e8, 1e-12);
  // one layer on the CPU (1e11 FLOP/s), one on the GPU (1e12 FLOP/s)
  EXPECT_NEAR(d.compute_s, 0.01 + 0.001, 1e-12);
  // KV appends 1e-5 + 2e-5, streaming 1.001e9 at 1e10 and at 1e11, no copies on UMA
  EXPECT_NEAR(d.memory_s, 3e-5 + 0.1001 + 0.01001, 1e-12);
}

TEST(CostModel, AndroidOverloadIsSetM3AfterSwappingOtherAppsOut) {
  auto o = cpu_device("O", 1.5e9);
  o.os = OsClass::kAndroid;
  o.swap_available_bytes = 300000000;
  o.swappable_bytes = 200000000;  // the smaller of the two can be swapped out
  auto p = two_devices(o);
  const auto r = predict(p, {2, 2}, {0, 0});
  // need 2.012e9 against 1.5e9 + 2e8
  EXPECT_NEAR(r.devices[1].disk_s, (2.012e9 - 1.7e9) / 1e9, 1e-12);
}

TEST(CostModel, CudaLayersAreNotReloadedAndCopiesArePaidPerWindow) {
  auto o = cpu_device("O", 0.5e9);
  add_gpu(o, GpuKind::kCuda, 1.5e9);
  auto p = two_devices(o);
  const auto r = predict(p, {2, 2}, {0, 1});
  ASSERT_TRUE(r.feasible) << r.reason;
  const auto& d = r.devices[1];
  // only the CPU layer counts against RAM: 1.001e9 + 1e7 - 0.5e9 reloaded
  EXPECT_NEAR(d.disk_s, (1.011e9 - 0.5e9) / 1e9, 1e-12);
  // one window: RAM->VRAM and VRAM->RAM copies of 1e-4 s each
  EXPECT_NEAR(d.memory_s, 3e-5 + 0.1001 + 0.01001 + 2e-4, 1e-12);
}

TEST(CostModel, GpuLayersBeyondVramAreInfeasible) {
  auto o = cpu_device("O", 8e9);
  add_gpu(o, GpuKind::kCuda, 0.5e9);
  auto p = two_devices(o);
  const auto r = predict(p, {2, 2}, {0, 1});
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("VRAM"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("'O'"), std::string::npos) << r.reason;
}

TEST(CostModel, OverloadingASlowDiskIsInfeasible) {
  auto p = two_devices(cpu_device("O", 1.5e9, 100, 0.05e9));
  const auto r = predict(p, {2, 2}, {0, 0});
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("too slow"), std::string::npos) << r.reason;
  // The same slow device is fine when its layers fit.
  auto q = two_devices(cpu_device("O", 8e9, 100, 0.05e9));
  EXPECT_TRUE(predict(q, {2, 2}, {0, 0}).feasible);
}

TEST(CostModel, PartialLastRoundFillsDevicesInRingOrder) {
  auto p = two_devices(cpu_device("O", 8e9));
  p.model = round_model(5);  // L = 5, W = 4: one full round and one layer more
  const auto r = predict(p, {2, 2}, {0, 0});
  EXPECT_EQ(r.k, 2u);
  EXPECT_EQ(r.devices[0].layers, 3u);
  EXPECT_EQ(r.devices[0].windows, 2u);
  EXPECT_EQ(r.devices[1].layers, 2u);
  EXPECT_EQ(r.devices[1].windows, 1u);
  EXPECT_NEAR(r.devices[0].comm_s, 2 * 0.006, 1e-12);
}

TEST(CostModel, MoreRoundsMeanMoreHopsButSameLayers) {
  auto p = two_devices(cpu_device("O", 8e9));
  const auto one = predict(p, {2, 2}, {0, 0});
  const auto two = predict(p, {1, 1}, {0, 0});  // k = 2
  EXPECT_EQ(two.k, 2u);
  EXPECT_EQ(two.devices[1].layers, 2u);
  EXPECT_NEAR(two.devices[1].compute_s, one.devices[1].compute_s, 1e-12);
  EXPECT_NEAR(two.devices[1].comm_s, 2 * one.devices[1].comm_s, 1e-12);
}

TEST(CostModel, ALoneDeviceDoesNotCommunicateAndIdleDevicesCostNothing) {
  auto p = two_devices(cpu_device("O", 8e9));
  const auto r = predict(p, {4, 0}, {0, 0});
  EXPECT_EQ(r.devices[0].comm_s, 0.0);
  EXPECT_EQ(r.devices[1].total_s(), 0.0);
  // As a relay, the idle device forwards one hidden state per round.
  const auto relay = predict(p, {4, 0}, {0, 0}, {false, true});
  EXPECT_NEAR(relay.devices[1].comm_s, 0.006, 1e-12);
  EXPECT_NEAR(relay.tpot_s - r.tpot_s, 0.006 + 0.006, 1e-12);  // the head now sends too
}

TEST(CostModel, RejectsMismatchedPlansAndMissingThroughput) {
  auto p = two_devices(cpu_device("O", 8e9));
  EXPECT_THROW(predict(p, {2}, {0}), UsageError);
  EXPECT_THROW(predict(p, {2, 2}, {3, 0}), UsageError);
  p.devices[1].cpu.flops.erase(TensorType::kQ4_K);
  try {
    check_problem(p);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hearth::plan
