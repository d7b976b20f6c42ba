// The expert store (cluster/expert_store.h) on its own: reads give the mapping's bytes, and the
// resident experts follow the router's picks.
#include "hearth/cluster/expert_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "hearth/base/error.h"
#include "hearth/gguf/gguf_file.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"

namespace hearth::cluster {
namespace {

namespace fs = std::filesystem;

std::string moe_model() {
  const auto dir =
      hearth::testing::scratch_dir() / ("hearth_expert_store_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return testing::write_moe_model((dir / "moe.gguf").string(), 2, "q4_k_m", 1);
}

uint64_t bytes_of(const compute::WeightView& w) {
  return *gguf::row_bytes(w.type, static_cast<uint64_t>(w.cols)) * static_cast<uint64_t>(w.rows);
}

// The experts whose gate matrix is among the store's resident ranges, in layer `l`.
std::set<int> resident_in(const ExpertStore& s, const model::ModelWeights& w, int l) {
  std::set<int> out;
  const auto ranges = s.ranges(true);
  for (size_t e = 0; e < w.layers[l].experts.size(); ++e) {
    const auto* p = static_cast<const uint8_t*>(w.layers[l].experts[e].gate.data);
    for (const auto& r : ranges) out.insert(r.first == p ? static_cast<int>(e) : -1);
  }
  out.erase(-1);
  return out;
}

TEST(ExpertStore, ReadsGiveTheMappingsBytesAndResidentExpertsFollowTheRouter) {
  const auto path = moe_model();
  const auto file = gguf::GgufFile::open(path);
  const auto w = model::bind_weights(file, model::load_hparams(file));
  const std::vector<int> layers = {0, 1};
  // q4_k_m keeps some layers' down projections at q6_k: expert sizes differ by layer.
  const uint64_t one = ExpertStore::expert_bytes(w.layers[1].experts[0]);
  const uint64_t mean = (ExpertStore::expert_bytes(w.layers[0].experts[0]) + one) / 2;
  ExpertStore store(path, file.bytes().data(), w, layers, 8 * mean);  // 4 per layer
  EXPECT_EQ(store.resident_experts(), 8u);
  EXPECT_EQ(store.max_experts(), 4);
  EXPECT_EQ(resident_in(store, w, 0), (std::set<int>{0, 1, 2, 3}));  // uniform: the first

  // A non-resident expert comes back with the mapping's bytes in a buffer.
  const std::vector<int32_t> ids = {9, 2, 15, 4};
  std::vector<model::ExpertWeights> views;
  for (int32_t e : ids) views.push_back(w.layers[1].experts[static_cast<size_t>(e)]);
  store.acquire_experts(1, ids, views);
  for (size_t j = 0; j < ids.size(); ++j) {
    const auto& in_map = w.layers[1].experts[static_cast<size_t>(ids[j])];
    const bool resident = ids[j] == 2;
    EXPECT_EQ(views[j].down.data == in_map.down.data, resident) << ids[j];
    for (auto [got, want] : {std::pair{&views[j].gate, &in_map.gate},
                             {&views[j].up, &in_map.up},
                             {&views[j].down, &in_map.down}}) {
      EXPECT_EQ(std::memcmp(got->data, want->data, bytes_of(*want)), 0) << ids[j];
    }
  }
  auto c = store.counters();
  EXPECT_EQ(c.uses, 4u);
  EXPECT_EQ(c.reads, 3u);
  EXPECT_GE(c.bytes_read, 3 * one);
  EXPECT_LE(c.bytes_read, 3 * one + 3 * 3 * 2 * 4096);

  // Layer 0's router keeps picking 10..13 (and one of the rest in turn): after a choice those
  // four are the resident ones.
  for (uint64_t i = 0; i < ExpertStore::kRerankUses / 4 + 1; ++i) {
    const std::vector<int32_t> pick = {10, 11, 12, static_cast<int32_t>(i % 10)};
    std::vector<model::ExpertWeights> v;
    for (int32_t e : pick) v.push_back(w.layers[0].experts[static_cast<size_t>(e)]);
    store.acquire_experts(0, pick, v);
    const std::vector<int32_t> thirteen = {13};
    std::vector<model::ExpertWeights> v13 = {w.layers[0].experts[13]};
    store.acquire_experts(0, thirteen, v13);
  }
  EXPECT_EQ(resident_in(store, w, 0), (std::set<int>{10, 11, 12, 13}));
  EXPECT_EQ(resident_in(store, w, 1), (std::set<int>{0, 1, 2, 3}));  // layer 1 unchanged
  EXPECT_EQ(store.resident_experts(), 8u);
  // A layer this device does not run, or more experts than a token's, is refused.
  std::vector<model::ExpertWeights> v(5, w.layers[0].experts[0]);
  const std::vector<int32_t> five = {0, 1, 2, 3, 4};
  EXPECT_THROW(store.acquire_experts(0, five, v), UsageError);
}

}  // namespace
}  // namespace hearth::cluster
