// The overlap cost model: hand-computed cases with round-number devices (fixtures.h), the
// closed-form ring solution against the model's LP solved by CBC, Halda against exhaustive
// search, and a realistic ring on which rounds (k >= 2) pay off.
#include <gtest/gtest.h>

#include <cstdio>

#include "fixtures.h"
#include "hearth/base/error.h"
#include "hearth/plan/baselines.h"
#include "hearth/plan/cost_model.h"
#include "hearth/plan/halda.h"
#include "hearth/plan/ilp.h"
#include "hearth/plan/limits.h"
#include "hearth/plan/plan.h"

namespace hearth::plan {
namespace {

using namespace test;

// Two CPU devices, L = 4, ctx 1000 (b' = 1.001e9). The head H holds everything it gets; O has
// 1.512e9 bytes, so 2 layers (pinned: 2 * 1e6 KV + 1e7 buffers) leave cap = 1.5e9 for 2e9 of
// weights: E = 0.5e9 over, at 1e9 B/s. Stream units of 5e7 bytes: C_min = 1e8. No pressure
// target (1: the buffer may take all the memory it has), so that no row slices cut C_min.
Problem two_devices() {
  Problem p;
  p.model = round_model(4);
  p.model.stream_unit_bytes = 50000000;
  p.options.ctx = 1000;
  p.options.model = CostModel::kOverlap;
  p.options.pressure_target = 1.0;
  auto head = cpu_device("H", 8e9);
  head.head = true;
  p.devices = {head, cpu_device("O", 1.512e9)};
  return p;
}

// Per device with 2 layers, each layer's arithmetic (0.01 s), its reads (0.1001 s) and the KV
// append (1e-5 s), summed: T_O = 2 (0.01 + 0.1001 + 1e-5) = 0.22022 s; the head adds its output
// layer's reads (0.02001 s) and arithmetic (0.002 s): T_H = 0.24223 s. One hop: 2 ms + 4 ms.
constexpr double kTH = 0.24223, kTO = 0.22022, kHop = 0.006;

TEST(OverlapModel, OneRoundExposesTheExcessBeyondOwnCompute) {
  const auto p = two_devices();
  const auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.k, 1u);
  const auto& h = r.devices[0];
  EXPECT_FALSE(h.overloaded);
  EXPECT_EQ(h.stream_bytes, 0.0);
  EXPECT_EQ(h.disk_s, 0.0);  // no embedding-row term: the head's rows are resident
  EXPECT_NEAR(h.compute_s + h.memory_s, kTH, 1e-12);
  EXPECT_NEAR(h.assigned_bytes, 2e9 + 1e5 + 2e8, 1e-3);
  const auto& o = r.devices[1];
  EXPECT_TRUE(o.overloaded);
  EXPECT_NEAR(o.assigned_bytes, 2e9, 1e-3);
  // k = 1: the buffer is neutral and kept at C_min; X = E + C_min, e = E / s - T.
  EXPECT_NEAR(o.stream_buffer_bytes, 1e8, 1e-3);
  EXPECT_NEAR(o.weight_budget_bytes, 1.5e9 - 1e8, 1e-3);
  EXPECT_NEAR(o.stream_bytes, 6e8, 1e-3);
  EXPECT_NEAR(o.disk_s, 0.6, 1e-12);
  EXPECT_NEAR(o.exposed_s, 0.5 - kTO, 1e-12);
  EXPECT_NEAR(r.tpot_s, kTH + kTO + 2 * kHop + 0.5 - kTO, 1e-9);
  double sum = 0;
  for (const auto& d : r.devices) sum += d.total_s();
  EXPECT_NEAR(sum, r.tpot_s, 1e-12);
}

TEST(OverlapModel, TwoRoundsHideReadsInTheIdleGaps) {
  const auto p = two_devices();
  const auto r = predict(p, {1, 1}, {0, 0});  // k = 2, the same 2 layers per device
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.k, 2u);
  // e(t) = 2E/s + comm - T - t = 0.79178 - t; t = T_H + T_O + 2 * 2 hops + e:
  // t = (0.48645 + 0.79178) / 2 = 0.639115. The buffer is the largest whose read still fits
  // in t - comm: C = s (t - comm) - E = 1.27115e8, and the idle-room bound is tight.
  const double t = (kTH + kTO + 4 * kHop + 2 * 0.5 + 2 * kHop - kTO) / 2;
  EXPECT_NEAR(r.tpot_s, t, 1e-9);
  const auto& o = r.devices[1];
  const double c = 1e9 * (t - 2 * kHop) - 0.5e9;
  EXPECT_NEAR(o.stream_buffer_bytes, c, 1e-3);
  EXPECT_NEAR(o.stream_bytes, 0.5e9 + c, 1e-3);
  EXPECT_NEAR(o.weight_budget_bytes, 1.5e9 - c, 1e-3);
  EXPECT_NEAR(o.exposed_s, (0.5e9 - c) / 1e9 - kTO, 1e-9);
  EXPECT_NEAR(2 * c / 1e9, t - kTO - o.exposed_s - 2 * kHop, 1e-9);  // idle room, tight
  // Better than one round, which cannot hide anything behind the other device.
  EXPECT_LT(r.tpot_s, predict(p, {2, 2}, {0, 0}).tpot_s);
}

// A disk that serves B bytes at once after an idle gap (profile disk_burst_bytes) hides B more
// per gap, as B more buffer would, without taking memory: the bytes read stay E + C.
TEST(OverlapModel, ADiskBurstHidesReadsAsMoreBufferWould) {
  auto p = two_devices();
  p.devices[1].disk_burst_bytes = 1e7;
  const auto r1 = predict(p, {2, 2}, {0, 0});  // k = 1: e = (E - B) / s - T
  ASSERT_TRUE(r1.feasible) << r1.reason;
  EXPECT_NEAR(r1.devices[1].exposed_s, 0.49 - kTO, 1e-12);
  EXPECT_NEAR(r1.devices[1].stream_bytes, 6e8, 1e-3);
  EXPECT_NEAR(r1.devices[1].stream_buffer_bytes, 1e8, 1e-3);
  // k = 2: as TwoRoundsHideReadsInTheIdleGaps with E - B where the gaps hide: e(t) =
  // 2 (E - B) / s + comm - T - t and t = T_H + T_O + 4 hops + e(t).
  const auto r2 = predict(p, {1, 1}, {0, 0});
  ASSERT_TRUE(r2.feasible) << r2.reason;
  const double t = (kTH + kTO + 4 * kHop + 2 * 0.49 + 2 * kHop - kTO) / 2;
  EXPECT_NEAR(r2.tpot_s, t, 1e-9);
  const double c = 1e9 * (t - 2 * kHop) - 0.5e9;
  EXPECT_NEAR(r2.devices[1].stream_buffer_bytes, c, 1e-3);
  EXPECT_NEAR(r2.devices[1].exposed_s, (0.5e9 - c - 2e7) / 1e9 - kTO, 1e-9);
  p.devices[1].disk_burst_bytes = 0;
  EXPECT_LT(r2.tpot_s, predict(p, {1, 1}, {0, 0}).tpot_s);
  // A burst of the whole excess: nothing is left to expose but the disk's own rate, X / s.
  p.devices[1].disk_burst_bytes = 1e9;
  const auto r3 = predict(p, {1, 1}, {0, 0});
  EXPECT_NEAR(r3.tpot_s, 2 * kHop + 0.6, 1e-9);
  EXPECT_NEAR(r3.devices[1].stream_buffer_bytes, 1e8, 1e-3);
}

// The burst is not free: it comes at the disk's peak rate u. At k = 1 the whole excess is read
// after the gap, so e >= E / u - T as well as (E - B) / s - T. (k >= 2, where the buffer each
// gap fills is not read after it: ClosedFormEqualsTheLpSolvedByCbc, whose random devices have
// peak rates.)
TEST(OverlapModel, ADiskBurstComesAtThePeakRate) {
  auto p = two_devices();
  p.devices[1].disk_seq_read_bps = 2e9;  // X / s = 0.3 s: the reader's own bound is slack
  p.devices[1].disk_burst_bytes = 2e8;   // (X - C - B) / s = 0.15 s: below T, nothing exposed
  auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_NEAR(r.devices[1].exposed_s, 0.0, 1e-12);
  EXPECT_NEAR(r.tpot_s, kTH + kTO + 2 * kHop, 1e-9);
  p.devices[1].disk_peak_read_bps = 2e9;  // E / u = 0.25 s
  r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_NEAR(r.devices[1].exposed_s, 0.25 - kTO, 1e-12);
  EXPECT_NEAR(r.tpot_s, kTH + kTO + 2 * kHop + 0.25 - kTO, 1e-9);
  // A peak as fast as you like gives back the burst served at once.
  p.devices[1].disk_peak_read_bps = 1e15;
  EXPECT_NEAR(predict(p, {2, 2}, {0, 0}).devices[1].exposed_s, 0.0, 1e-9);
}

TEST(OverlapModel, ASlowReaderSetsTheTpotAndItsSlackIsExposed) {
  auto p = two_devices();
  p.model.stream_unit_bytes = 250000000;  // C_min = 5e8: X >= E + C_min = 1e9, 1 s of reads
  const auto r = predict(p, {1, 1}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_NEAR(r.tpot_s, 2 * kHop + 1.0, 1e-9);  // t >= comm + D
  const auto& o = r.devices[1];
  EXPECT_NEAR(o.stream_buffer_bytes, 5e8, 1e-3);
  EXPECT_NEAR(o.disk_s, 1.0, 1e-12);
  EXPECT_NEAR(o.exposed_s, 1.0 + 2 * kHop - (kTH + kTO + 4 * kHop), 1e-9);
}

TEST(OverlapModel, PlainMmapRereadsEverythingWhenOverMemory) {
  auto p = two_devices();
  p.options.streaming = false;
  const auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  const auto& o = r.devices[1];
  EXPECT_NEAR(o.stream_bytes, 2e9, 1e-3);  // all of A, not the paper's 0.5e9 excess
  EXPECT_EQ(o.stream_buffer_bytes, 0.0);
  EXPECT_NEAR(o.exposed_s, 2.0, 1e-12);
  EXPECT_NEAR(r.tpot_s, kTH + kTO + 2 * kHop + 2.0, 1e-9);
}

// A mixture of experts, 0.8e9 of each 1e9 layer experts of which a token reads a quarter: a
// token reads 1e9 - 0.75 * 0.8e9 = 0.4e9 of a layer in RAM (0.0401 s with its KV), and O's
// 0.5e9 over memory are all experts, of which it reads a quarter per token (1.25e8 at 1e9 B/s,
// exposed), streaming nothing.
TEST(OverlapModel, ExpertsLeaveMemoryFirstAndAreReadByTheirShare) {
  auto p = two_devices();
  p.model.expert_bytes = 0.8e9;
  p.model.expert_share = 0.25;
  const auto r = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  const double t_o = 2 * (0.01 + 0.0401 + 1e-5), t_h = t_o + 0.02001 + 0.002;
  const auto& h = r.devices[0];
  EXPECT_FALSE(h.overloaded);
  EXPECT_NEAR(h.compute_s + h.memory_s, t_h, 1e-12);
  const auto& o = r.devices[1];
  EXPECT_TRUE(o.overloaded);
  EXPECT_NEAR(o.compute_s + o.memory_s, t_o, 1e-12);
  EXPECT_EQ(o.stream_buffer_bytes, 0.0);
  EXPECT_NEAR(o.expert_read_bytes, 1.25e8, 1e-3);
  EXPECT_NEAR(o.stream_bytes, 1.25e8, 1e-3);
  EXPECT_NEAR(o.exposed_s, 0.125, 1e-12);
  EXPECT_NEAR(r.tpot_s, t_h + t_o + 2 * kHop + 0.125, 1e-9);

  // Experts 0.2e9 of each layer: O's 0.4e9 of experts leave memory and 0.1e9 of dense weights
  // stream (k = 1: e = E / s - T < 0, hidden); a token reads 1e8 of experts and 0.2e9 of stream.
  p.model.expert_bytes = 0.2e9;
  const auto q = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(q.feasible) << q.reason;
  const double t_o2 = 2 * (0.01 + 0.0851 + 1e-5), t_h2 = t_o2 + 0.02001 + 0.002;
  const auto& o2 = q.devices[1];
  EXPECT_NEAR(o2.expert_read_bytes, 1e8, 1e-3);
  EXPECT_NEAR(o2.stream_buffer_bytes, 1e8, 1e-3);
  EXPECT_NEAR(o2.stream_bytes, 0.1e9 + 1e8 + 1e8, 1e-3);
  EXPECT_NEAR(o2.exposed_s, 0.1, 1e-12);
  EXPECT_NEAR(q.tpot_s, t_h2 + t_o2 + 2 * kHop + 0.1, 1e-9);
  double sum = 0;
  for (const auto& d : q.devices) sum += d.total_s();
  EXPECT_NEAR(sum, q.tpot_s, 1e-12);
}

TEST(OverlapModel, HeadMayRunNoLayers) {
  auto p = two_devices();
  p.devices[1] = cpu_device("O", 8e9);
  const auto r = predict(p, {0, 4}, {0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.k, 1u);
  const auto& h = r.devices[0];
  EXPECT_EQ(h.layers, 0u);
  EXPECT_NEAR(h.compute_s, 0.002, 1e-12);  // the output layer only
  // and the reads of its weights
  EXPECT_NEAR(h.compute_s + h.memory_s, 0.002 + (1e5 + 2e8) / 1e10, 1e-12);
  EXPECT_NEAR(h.comm_s, kHop, 1e-12);  // one hop per round to O
  EXPECT_NEAR(r.devices[1].comm_s, kHop, 1e-12);
  auto paper = p;
  paper.options.model = CostModel::kPaper;
  EXPECT_FALSE(predict(paper, {0, 4}, {0, 0}).feasible);
  // In a plan the head is not dropped: it has its costs.
  const auto plan = make_plan(p, {{0, 4}, {0, 0}, {false, false}}, "test");
  EXPECT_FALSE(plan.devices[0].dropped);
  EXPECT_NEAR(plan.devices[0].cost.total_s(), 0.002 + (1e5 + 2e8) / 1e10 + kHop, 1e-12);
  EXPECT_NEAR(plan.predicted_tpot_ms / 1e3, r.tpot_s, 1e-12);
}

// With two or more workers after it, a head without layers sees each token once: the last
// worker hands every other round straight to the first (cluster::RingSource). With one worker
// the head forwards every round.
TEST(OverlapModel, HeadWithoutLayersHopsOncePerTokenAheadOfTwoWorkers) {
  auto p = two_devices();
  p.devices[1] = cpu_device("O", 8e9);
  p.devices.push_back(cpu_device("P", 8e9));
  const auto r = predict(p, {0, 1, 1}, {0, 0, 0});
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.k, 2u);
  EXPECT_NEAR(r.devices[0].comm_s, kHop, 1e-12);
  EXPECT_NEAR(r.devices[1].comm_s, 2 * kHop, 1e-12);
  EXPECT_NEAR(r.devices[2].comm_s, 2 * kHop, 1e-12);
  // The head with layers sends once per round again.
  EXPECT_NEAR(predict(p, {1, 1, 1}, {0, 0, 0}).devices[0].comm_s, 2 * kHop, 1e-12);
  auto one_worker = two_devices();
  one_worker.devices[1] = cpu_device("O", 8e9);
  const auto r1 = predict(one_worker, {0, 2}, {0, 0});
  ASSERT_TRUE(r1.feasible) << r1.reason;
  EXPECT_EQ(r1.k, 2u);
  EXPECT_NEAR(r1.devices[0].comm_s, 2 * kHop, 1e-12);
}

TEST(OverlapModel, SlowDisksAndTooSmallBuffersCannotStream) {
  auto p = two_devices();
  p.devices[1].disk_seq_read_bps = 0.05e9;
  auto r = predict(p, {2, 2}, {0, 0});
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("too slow to stream"), std::string::npos) << r.reason;
  p = two_devices();
  p.model.stream_unit_bytes = 800000000;  // C_min 1.6e9 > cap 1.5e9
  p.options.pressure_target = 4.0;        // slices as large as all the memory: no cut
  r = predict(p, {2, 2}, {0, 0});
  EXPECT_FALSE(r.feasible);
  EXPECT_NE(r.reason.find("buffer"), std::string::npos) << r.reason;
}

// The pressure target bounds the buffer: O's total memory is 1.512e9, so with the paper's 6%
// (of which a sixth is left untracked) its buffer may take 0.05 * 1.512e9 - 1e7 (working
// buffers) - 2e6 (KV cache of its 2 layers at ctx 1000) = 6.36e7 bytes, and it reads matrices
// in row slices of a quarter of 6%, 2.268e7 bytes: C_min = 4.536e7.
TEST(OverlapModel, PressureTargetBoundsTheBuffer) {
  auto p = two_devices();
  p.options.pressure_target = 0.06;
  const auto one = predict(p, {2, 2}, {0, 0});
  ASSERT_TRUE(one.feasible) << one.reason;
  EXPECT_NEAR(one.devices[1].stream_buffer_bytes, 4.536e7, 1.0);  // k = 1: C_min
  EXPECT_NEAR(one.devices[1].stream_bytes, 0.5e9 + 4.536e7, 1.0);
  const auto two = predict(p, {1, 1}, {0, 0});
  ASSERT_TRUE(two.feasible) << two.reason;
  EXPECT_NEAR(two.devices[1].stream_buffer_bytes, 6.36e7, 1.0);  // the cap binds (was 1.16e8)
  // e = (E - (k - 1) C) / s - T, and t = T_H + T_O + 4 hops + e.
  const double e = (0.5e9 - 6.36e7) / 1e9 - kTO;
  EXPECT_NEAR(two.devices[1].exposed_s, e, 1e-9);
  EXPECT_NEAR(two.tpot_s, kTH + kTO + 4 * kHop + e, 1e-9);
  p.options.pressure_target = 1.0;
  EXPECT_LT(predict(p, {1, 1}, {0, 0}).tpot_s, two.tpot_s);  // a larger buffer hides more
}

// A long context's KV cache takes the pressure target's share from the buffer: at ctx 31000
// O's 2 layers hold 6.2e7 bytes of KV, leaving 0.05 * 1.512e9 - 1e7 - 6.2e7 = 3.6e6, below
// C_min (4.536e7): the buffer stays at C_min, which the target's own slices still allow.
TEST(OverlapModel, KvCacheTakesTheBuffersShare) {
  auto p = two_devices();
  p.options.pressure_target = 0.06;
  p.options.ctx = 31000;
  const auto o = overlap_terms(p, 1, 2, 0, 2, 4);
  EXPECT_NEAR(o.buffer_share_bytes, 3.6e6, 1.0);
  EXPECT_NEAR(o.buffer_max_bytes, 4.536e7, 1.0);
  const auto two = predict(p, {1, 1}, {0, 0});
  ASSERT_TRUE(two.feasible) << two.reason;
  EXPECT_NEAR(two.devices[1].stream_buffer_bytes, 4.536e7, 1.0);
  // Each extra layer's KV comes off the share: the share is linear in the layers.
  const auto three = overlap_terms(p, 1, 3, 0, 2, 4);
  EXPECT_NEAR(o.buffer_share_bytes - three.buffer_share_bytes, 3.1e7, 1.0);
}

// The LP for fixed (w, n) in its first form, written directly for CBC: variables t, C_m, e_m
// of each streaming device; with H = k (C + B) (every gap fills the buffer, and the disk
// serves its burst B on top): e >= D - T - H / s, H / s <= t - T - e - comm, t >= D,
// C_min <= C <= cap, H <= X, t >= sum (T + e + comm). predict() lets a gap fill the buffer
// partly (hidden = min(k (C + B), X, what the gaps allow)), which changes nothing unless even
// the smallest buffer cannot be filled in the gaps. `min_fill_ok` says whether that holds at
// predict()'s TPOT: then the two optima are equal. nullopt when this form has no solution
// (H <= X fails at C_min).
std::optional<double> lp_tpot(const Problem& p, const Prediction& pred, bool& min_fill_ok) {
  min_fill_ok = true;
  const double k = pred.k;
  Ilp ilp;
  const int tv = ilp.add_var(1.0, 0, kInf, false);
  IlpRow sum{{{tv, 1.0}}, 0.0, kInf};  // t - sum(e) >= sum(T + comm + fixed)
  for (size_t m = 0; m < p.devices.size(); ++m) {
    const auto& dc = pred.devices[m];
    const bool head_only = m == 0 && dc.w == 0;
    if (dc.w == 0 && !dc.relay && !head_only) continue;
    if (dc.relay) {
      sum.lo += dc.comm_s;
      continue;
    }
    const auto o = overlap_terms(p, m, dc.layers, dc.gpu_layers, dc.windows,
                                 dc.comm_s / link_latency_s(p.devices[m], p.model.hidden_bytes));
    sum.lo += o.busy_s + o.paper.comm_s + o.fixed_exposed_s;
    if (o.mode != ReadMode::kStreams) continue;
    const double s = o.disk_bps, E = o.excess_bytes(), T = o.busy_s, comm = o.paper.comm_s;
    const double B = o.disk_burst_bytes, u = o.disk_peak_bps;
    double c_hi = std::min(o.cap_bytes, std::max(o.buffer_min_bytes, o.buffer_max_bytes));
    if (k >= 2) c_hi = std::min(c_hi, (u > 0 ? E : E - k * B) / (k - 1));
    if (c_hi < o.buffer_min_bytes || E < B) return std::nullopt;
    const double e_at_min = std::max(0.0, (E - (k - 1) * o.buffer_min_bytes - k * B) / s - T);
    if (k * (o.buffer_min_bytes + B) / s + e_at_min + T + comm > pred.tpot_s * (1 + 1e-12))
      min_fill_ok = false;
    // C and H in units of s (seconds of reading) keep the rows of order one.
    const int cv = ilp.add_var(0, o.buffer_min_bytes / s, c_hi / s, false);
    const int hv = ilp.add_var(0, 0, kInf, false);
    const int ev = ilp.add_var(0, 0, kInf, false);
    sum.coefs.emplace_back(ev, -1.0);
    // H <= k (C + B), H <= E + C
    ilp.rows.push_back({{{hv, 1.0}, {cv, -double(k)}}, -kInf, k * B / s});
    ilp.rows.push_back({{{hv, 1.0}, {cv, -1.0}}, -kInf, E / s});
    // e >= (E + C - H) / s - T
    ilp.rows.push_back({{{ev, 1.0}, {cv, -1.0}, {hv, 1.0}}, E / s - T, kInf});
    // e >= (E + C - k C) / u - T
    if (u > 0) ilp.rows.push_back({{{ev, 1.0}, {cv, (k - 1) * s / u}}, E / u - T, kInf});
    // H / s + e - t <= -T - comm
    ilp.rows.push_back({{{hv, 1.0}, {ev, 1.0}, {tv, -1.0}}, -kInf, -T - comm});
    // (E + C) / s <= t
    ilp.rows.push_back({{{cv, 1.0}, {tv, -1.0}}, -kInf, -E / s});
  }
  ilp.rows.push_back(sum);  // t >= sum: where a reader's bound sets t, the ring waits for it
  const auto sol = solve_ilp(ilp);
  if (!sol.optimal) return std::nullopt;
  return sol.objective;
}

TEST(OverlapModel, ClosedFormEqualsTheLpSolvedByCbc) {
  std::mt19937_64 rng(16);
  int compared = 0, streaming = 0, rounds = 0, relaxed = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t L = std::array<uint32_t, 3>{8, 12, 24}[i % 3];
    const size_t M = 1 + i % 4;
    auto p = random_problem(rng, L, M, CostModel::kOverlap);
    const auto ks = valid_rounds(L, M);
    const uint32_t k = ks[rng() % ks.size()];
    const uint32_t W = L / k;
    // A random split of W with every device >= 1 (the head may get 0 when M > 1).
    std::vector<uint32_t> w(M, 1), n(M, 0);
    if (M > 1 && rng() % 4 == 0) w[0] = 0;
    uint32_t left = W;
    for (auto x : w) left -= x;
    while (left > 0) {
      ++w[rng() % M];
      --left;
    }
    const auto pred = predict(p, w, n);
    if (!pred.feasible) continue;
    bool min_fill_ok = true;
    const auto lp = lp_tpot(p, pred, min_fill_ok);
    if (!lp) continue;
    EXPECT_LE(pred.tpot_s, *lp * (1 + 1e-7)) << "instance " << i;
    if (!min_fill_ok) {
      ++relaxed;
      continue;
    }
    ++compared;
    for (const auto& d : pred.devices) streaming += d.stream_buffer_bytes > 0;
    rounds += k >= 2;
    EXPECT_NEAR(pred.tpot_s, *lp, 1e-7 * *lp) << "instance " << i << " k=" << k;
  }
  std::printf(
      "closed form vs CBC: equal on %d plans (%d streaming devices, %d with k >= 2); lower on "
      "%d where full gap fills would not fit\n",
      compared, streaming, rounds, relaxed);
  EXPECT_GT(compared, 300);
  EXPECT_GT(streaming, 200);
  EXPECT_GT(rounds, 100);
}

struct Tally {
  int feasible = 0, equal = 0, rounds = 0, head_zero = 0, streams = 0;
};

void compare_with_exhaustive(uint64_t seed, int instances, bool streaming, Tally& t) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < instances; ++i) {
    const uint32_t L = std::array<uint32_t, 4>{4, 6, 8, 12}[i % 4];
    const size_t M = 1 + (i / 4) % 4;
    auto p = random_problem(rng, L, M, CostModel::kOverlap);
    p.options.streaming = streaming;
    const auto opt = exhaustive(p);
    HaldaOptions o;
    o.select_devices = false;
    const auto a = halda_assign(p, std::vector<bool>(M, true), o, nullptr);
    ASSERT_EQ(a.has_value(), opt.feasible) << "seed " << seed << " instance " << i;
    if (!a) continue;
    ++t.feasible;
    const auto pred = predict(p, a->w, a->n);
    ASSERT_TRUE(pred.feasible) << "instance " << i << ": " << pred.reason;
    const double h = pred.tpot_s, best = opt.predicted_tpot_ms / 1e3;
    EXPECT_GE(h, best * (1 - 1e-9)) << "seed " << seed << " instance " << i;
    EXPECT_NEAR(h, best, best * 1e-7) << "seed " << seed << " instance " << i << " L=" << L
                                      << " M=" << M << " k=" << pred.k << " vs " << opt.k;
    t.equal += std::abs(h - best) <= best * 1e-7;
    t.rounds += opt.k >= 2;
    t.head_zero += opt.devices[0].w == 0;
    for (const auto& d : opt.devices) t.streams += d.cost.stream_buffer_bytes > 0;
  }
}

// Halda's MILP per k is the model itself, so it must reach the exhaustive optimum.
TEST(OverlapModel, HaldaEqualsExhaustiveOptimumOnRandomRings) {
  Tally t;
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) compare_with_exhaustive(seed, 100, true, t);
  std::printf(
      "overlap model, random rings: %d feasible, Halda = optimum on %d; optima with k >= 2: %d, "
      "head w = 0: %d, streaming devices: %d\n",
      t.feasible, t.equal, t.rounds, t.head_zero, t.streams);
  EXPECT_EQ(t.equal, t.feasible);
  EXPECT_GT(t.feasible, 350);
  EXPECT_GT(t.rounds, 20);
  EXPECT_GT(t.head_zero, 50);
  EXPECT_GT(t.streams, 150);
}

TEST(OverlapModel, HaldaEqualsExhaustiveOptimumWithPlainMmap) {
  Tally t;
  compare_with_exhaustive(7, 200, false, t);
  std::printf("overlap model without streaming: %d feasible, Halda = optimum on %d\n", t.feasible,
              t.equal);
  EXPECT_EQ(t.equal, t.feasible);
}

// Four fast CPU devices whose memory holds half of Llama-3-8B and whose disks need longer to
// read their excess than they compute: one round exposes every device's reads; with rounds,
// each device reads its next window while the others compute.
TEST(OverlapModel, RoundsPayOffWhenReadsOutlastCompute) {
  Problem p;
  p.model = profiler::profile_preset("llama3-8b", 1.0, "q4_k_m");
  p.options.ctx = 1024;
  p.options.model = CostModel::kOverlap;
  const double per_device = p.model.total_weight_bytes() / 8;
  for (int i = 0; i < 4; ++i) {
    auto d = cpu_device("d" + std::to_string(i), per_device, 400, 2e9);
    d.cpu.mem_read_bps = 50e9;
    d.link.rtt_s = 1e-3;
    d.link.bandwidth_bps = 100e6;
    p.devices.push_back(d);
  }
  p.devices[0].head = true;
  const auto plan = halda(p);
  ASSERT_TRUE(plan.feasible) << plan.reason;
  EXPECT_GE(plan.k, 2u);
  // The best one-round plan, by exhaustive search over every split of the 32 layers.
  const uint32_t L = p.model.n_layers;
  double best1 = std::numeric_limits<double>::infinity();
  for (uint32_t a = 0; a <= L; ++a) {
    for (uint32_t b = 1; a + b <= L; ++b) {
      for (uint32_t c = 1; a + b + c < L; ++c) {
        const auto r = predict(p, {a, b, c, L - a - b - c}, {0, 0, 0, 0});
        if (r.feasible) best1 = std::min(best1, r.tpot_s);
      }
    }
  }
  ASSERT_LT(best1, std::numeric_limits<double>::infinity());
  std::printf("rounds pay off: Halda k = %u, %.1f ms; best k = 1 plan %.1f ms\n", plan.k,
              plan.predicted_tpot_ms, best1 * 1e3);
  EXPECT_LT(plan.predicted_tpot_ms / 1e3, best1 * 0.9);

  // Restricted to one round (hearth plan --rounds 1), Halda finds that best k = 1 plan.
  HaldaOptions one;
  one.rounds = 1;
  one.select_devices = false;  // the search above keeps every device
  const auto plan1 = halda(p, one);
  ASSERT_TRUE(plan1.feasible) << plan1.reason;
  EXPECT_EQ(plan1.k, 1u);
  EXPECT_NEAR(plan1.predicted_tpot_ms / 1e3, best1, best1 * 1e-7);
  // A k that does not divide the 32 layers has no plan, and the reason says so.
  HaldaOptions five;
  five.rounds = 5;
  const auto plan5 = halda(p, five);
  EXPECT_FALSE(plan5.feasible);
  EXPECT_NE(plan5.reason.find("k = 5"), std::string::npos) << plan5.reason;
}

}  // namespace
}  // namespace hearth::plan
