// The prefill model (plan/prefill.h): TTFT of a prompt in chunks that follow each other around
// the ring, against hand-computed pipelines, and the chunk it picks.
#include "hearth/plan/prefill.h"

#include <gtest/gtest.h>

#include "fixtures.h"

namespace hearth::plan {
namespace {

using namespace test;

PrefillDevice dev(double read_s, double per_token_s, double hop_s = 0) {
  PrefillDevice d;
  d.read_s = read_s;
  d.compute_s_per_token = per_token_s;
  d.hop_latency_s = hop_s;
  return d;
}

TEST(Prefill, ChunksFollowEachOtherThroughAPipeline) {
  // Four equal devices, compute-bound: 1 ms a token, reads 10 ms a chunk.
  PrefillModel m;
  m.devices.assign(4, dev(0.010, 0.001));
  // Serial: every device takes the whole prompt: 4 * max(10 ms, 512 ms).
  EXPECT_NEAR(m.ttft_s(512, 512), 4 * 0.512, 1e-12);
  // Chunks of 64: the first crosses four devices, the 7 others leave one chunk time apart.
  EXPECT_NEAR(m.ttft_s(512, 64), (4 + 7) * 0.064, 1e-12);
  // One chunk after another: every chunk crosses every device.
  EXPECT_NEAR(m.ttft_s(512, 64, /*pipelined=*/false), 8 * 4 * 0.064, 1e-12);
  // A last chunk smaller than the others: 100 = 64 + 36.
  EXPECT_NEAR(m.ttft_s(100, 64), 4 * 0.064 + 0.036, 1e-12);
  // Below the read time the chunk costs the read: 8 tokens take 10 ms, not 8.
  EXPECT_NEAR(m.ttft_s(16, 8), (4 + 1) * 0.010, 1e-12);
  // The best chunk is pipelined and beats serial by more than 2x on four devices.
  const int64_t c = m.best_chunk(2048);
  EXPECT_LT(c, 2048);
  EXPECT_LT(m.ttft_s(2048, c), 0.5 * m.ttft_s(2048, 2048));
}

TEST(Prefill, TheSlowestDevicePacesTheChunks) {
  PrefillModel m;
  m.devices = {dev(0, 0.001), dev(0, 0.003), dev(0, 0.001)};
  EXPECT_NEAR(m.ttft_s(300, 100), (0.1 + 0.3 + 0.1) + 2 * 0.3, 1e-12);
}

TEST(Prefill, HopLatencyAndReadsPerChunkMakeSerialBestWhenTheyDominate) {
  PrefillModel m;
  // Each chunk pays 1 s of hop latency on each of two devices; tokens are cheap.
  m.devices = {dev(0, 1e-4, 1.0), dev(0, 1e-4, 1.0)};
  EXPECT_EQ(m.best_chunk(512), 512);
  // A device that reads its weights from disk once per chunk: chunking multiplies the reads.
  PrefillDevice disk = dev(0, 1e-4);
  disk.disk_s = 5.0;
  m.devices = {dev(0, 1e-3), disk};
  EXPECT_EQ(m.best_chunk(512), 512);
}

// From a plan's prediction: per-device terms follow the profiles and the windows.
TEST(Prefill, ModelOfAPredictionUsesMatmulRatesAndTheWindows) {
  Problem p;
  p.model = round_model(4);
  p.options.ctx = 1000;
  p.options.model = CostModel::kOverlap;
  auto head = cpu_device("H", 64e9);
  head.head = true;
  auto other = cpu_device("O", 64e9);
  other.cpu.matmul_flops = flat(400e9);  // 4x its matvec rate
  p.devices = {head, other};
  const auto pred = predict(p, {1, 1}, {0, 0});  // k = 2
  ASSERT_TRUE(pred.feasible) << pred.reason;
  const auto m = prefill_model(p, pred);
  ASSERT_EQ(m.devices.size(), 2u);
  // Two layers each of 1e9 FLOPs per token: 2e9 / 1e11 on the head (matvec rate), 2e9 / 4e11.
  EXPECT_NEAR(m.devices[0].compute_s_per_token, 0.02, 1e-12);
  EXPECT_NEAR(m.devices[1].compute_s_per_token, 0.005, 1e-12);
  // Two layers of 1e9 bytes read from RAM at 1e10 B/s once per chunk.
  EXPECT_NEAR(m.devices[1].read_s, 0.2, 1e-12);
  // Two windows, two incoming hops of half a 4 ms round trip each.
  EXPECT_NEAR(m.devices[1].hop_latency_s, 2 * 0.002, 1e-12);
}

// A verification trip reads the same weights and adds only the arithmetic its weight reads
// do not hide, and the extra rows on the hops.
TEST(Prefill, AVerificationTripCostsTheDecodeTripPlusUnhiddenArithmetic) {
  Prediction pred;
  pred.tpot_s = 0.100;
  PrefillModel m;
  PrefillDevice a = dev(0, 0.001), b = dev(0, 0.004);
  a.decode_compute_s = 0.010;  // memory-bound decode: 10 rows of matmul arithmetic are hidden
  b.decode_compute_s = 0.010;
  b.hop_s_per_token = 0.0005;
  m.devices = {a, b};
  EXPECT_NEAR(verify_trip_s(pred, m, 1), 0.100, 1e-12);
  // 5 rows: a's 5 ms hidden by its 10 ms, b's 20 ms shows 10 ms, plus 4 rows on b's hops.
  EXPECT_NEAR(verify_trip_s(pred, m, 5), 0.100 + 0.010 + 4 * 0.0005, 1e-12);
  EXPECT_DOUBLE_EQ(expected_tokens_per_trip(1.0, 4), 5.0);
  EXPECT_DOUBLE_EQ(expected_tokens_per_trip(0.0, 4), 1.0);
  EXPECT_NEAR(expected_tokens_per_trip(0.5, 2), 1.75, 1e-12);
}

}  // namespace
}  // namespace hearth::plan
