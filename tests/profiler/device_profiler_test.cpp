// The device profiler on this machine and a small synthetic model: every figure the cost
// model needs is present and plausible, the cache is keyed by the model file, and the CLI's
// JSON loads with the DEVICES.json loader.
#include "hearth/profiler/device_profiler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "hearth/base/error.h"
#include "hearth/profiler/disk_probe.h"
#include "hearth/profiler/model_profiler.h"
#include "support/scratch_dir.h"
#include "support/synth_model.h"

namespace hearth::profiler {
namespace {

using profile::device_from_json;
using profile::device_to_json;
using profile::devices_from_json;
using profile::OsClass;

namespace fs = std::filesystem;

fs::path test_dir() {
  return hearth::testing::scratch_subdir("hearth_profiler_test");
}

std::string make_model(const std::string& file, uint64_t seed = 3) {
  const std::string path = (test_dir() / file).string();
  if (fs::exists(path)) return path;
  return hearth::testing::write_model(path, {.types = "q4_k_m", .seed = seed});
}

ProfilerOptions quick(const std::string& model) {
  ProfilerOptions o;
  o.model_path = model;
  o.threads = 1;
  o.cache_dir = (test_dir() / "cache").string();
  o.version = "test";
  o.name = "dev-under-test";
  o.kernel_budget_s = 0.015;
  o.disk_budget_s = 0.05;
  return o;
}

TEST(DiskProbe, ReadsTheFileBypassingTheCache) {
  const auto model = make_model("disk.gguf");
  const auto r = measure_disk_reads(model, 0.05);
  EXPECT_TRUE(r.method == "O_DIRECT" || r.method == "fadvise DONTNEED") << r.method;
  EXPECT_GT(r.seq_bytes, 0u);
  EXPECT_GT(r.random_bytes, 0u);
  EXPECT_GT(r.seq_bps, 1e6);  // even a slow disk moves more than 1 MB/s
  EXPECT_GT(r.random_bps, 1e5);
  EXPECT_GT(r.seq_queue_depth, 1);  // as the streamer reads: several requests outstanding
  // At most what one burst read may take (64 MiB), and only where the file holds that much.
  EXPECT_LE(r.burst_bytes, uint64_t{64} << 20);
  EXPECT_THROW(measure_disk_reads((test_dir() / "absent.gguf").string()), IoError);
  const auto empty = (test_dir() / "empty.gguf").string();
  { std::ofstream(empty, std::ios::binary); }
  EXPECT_THROW(measure_disk_reads(empty), IoError);
}

// The burst from a read's completions: a disk of constant rate has none; one that serves 8 MiB
// at once and then 100 MB/s has an 8 MiB burst (less what the rate gave in that time).
TEST(DiskProbe, BurstIsWhatAReadGetsBeyondItsRate) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  std::vector<ReadSample> steady, bursty;
  for (uint64_t i = 1; i <= 64; ++i) {
    steady.push_back({static_cast<double>(i * kMiB) / 100e6 * 1e3, i * kMiB});
    // 8 MiB within the first millisecond, then the rate.
    const double ms = i <= 8 ? 0.1 * static_cast<double>(i)
                             : 0.8 + static_cast<double>((i - 8) * kMiB) / 100e6 * 1e3;
    bursty.push_back({ms, i * kMiB});
  }
  EXPECT_NEAR(bytes_beyond_rate(steady, 100e6), 0.0, 1.0);
  EXPECT_NEAR(bytes_beyond_rate(bursty, 100e6), 8.0 * kMiB - 0.8e-3 * 100e6, 1.0);
  // A read slower than the rate it is measured against has no burst.
  EXPECT_EQ(bytes_beyond_rate(steady, 200e6), 0.0);
  // The burst came at 8 MiB per 0.8 ms; a read without one has only the rate itself.
  EXPECT_NEAR(burst_rate_bps(bursty, 100e6), 8.0 * kMiB / 0.8e-3, 1.0);
  EXPECT_NEAR(burst_rate_bps(steady, 100e6), 100e6, 1e-3);
  EXPECT_EQ(burst_rate_bps(steady, 200e6), 200e6);
  // The same burst after 2 ms until the first completion: the latency is not the rate.
  std::vector<ReadSample> late = bursty;
  for (auto& s : late) s.ms += 1.9;
  EXPECT_NEAR(burst_rate_bps(late, 100e6), 7.0 * kMiB / 0.7e-3, 1e3);
}

TEST(DeviceProfiler, FiguresArePresentAndPlausible) {
  const auto model = make_model("m.gguf");
  std::string method;
  const auto d = measure_device(quick(model), &method);
  EXPECT_EQ(d.name, "dev-under-test");
  EXPECT_EQ(d.os, OsClass::kLinux);
  EXPECT_GE(d.cores, 1u);
  EXPECT_GT(d.ram_total_bytes, uint64_t{64} << 20);
  EXPECT_GT(d.ram_available_bytes, 0u);
  EXPECT_LE(d.ram_available_bytes, d.ram_total_bytes);
  EXPECT_GT(d.disk_seq_read_bps, 1e6);
  EXPECT_GT(d.disk_random_read_bps, 1e5);
  EXPECT_FALSE(d.has_gpu());
  EXPECT_EQ(d.gpu.vram_available_bytes, 0u);
  // Every weight type of the model has a throughput, as the cost model requires.
  const auto mp = profile_model_file(model);
  for (const auto& [type, flops] : mp.mean_layer.flops) {
    ASSERT_TRUE(d.cpu.flops.count(type)) << gguf::tensor_type_name(type);
  }
  ASSERT_TRUE(d.cpu.flops.count(gguf::TensorType::kF16));  // attention on the f16 KV cache
  for (const auto& [type, flops] : d.cpu.flops) {
    EXPECT_GT(flops, 1e7) << gguf::tensor_type_name(type);  // > 10 MFLOP/s
    EXPECT_LT(flops, 1e13) << gguf::tensor_type_name(type);
  }
  EXPECT_GT(d.cpu.mem_read_bps, 1e8);
  EXPECT_GT(d.cpu.kv_copy_s, 0);
  EXPECT_LT(d.cpu.kv_copy_s, 1e-3);
  EXPECT_GT(d.link.bandwidth_bps, 0);
  // Through the DEVICES.json loader and back.
  const auto back = device_from_json(device_to_json(d), "round trip");
  EXPECT_EQ(back.name, d.name);
  EXPECT_EQ(back.cpu.flops.size(), d.cpu.flops.size());
  EXPECT_NEAR(back.cpu.mem_read_bps, d.cpu.mem_read_bps, 1);
}

TEST(DeviceProfiler, CacheIsKeyedByTheModelFile) {
  const auto model = make_model("cached.gguf", 5);
  auto o = quick(model);
  o.cache_dir = (test_dir() / "cache-key").string();
  fs::remove_all(o.cache_dir);
  const auto first = device_profile(o);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(fs::exists(first.cache_path));
  const auto second = device_profile(o);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.profile.cpu.flops.size(), first.profile.cpu.flops.size());
  EXPECT_EQ(second.profile.cpu.mem_read_bps, first.profile.cpu.mem_read_bps);
  o.refresh = true;
  EXPECT_FALSE(device_profile(o).from_cache);
  o.refresh = false;
  o.version = "other";
  EXPECT_FALSE(device_profile(o).from_cache);  // another hearth version re-measures
  EXPECT_TRUE(device_profile(o).from_cache);
  // A rewritten model file (new mtime/size) is another key.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  { std::ofstream(model, std::ios::app) << "x"; }
  EXPECT_FALSE(device_profile(o).from_cache);
  // A corrupt cache file is ignored and replaced.
  { std::ofstream(first.cache_path) << "{not json"; }
  EXPECT_FALSE(device_profile(o).from_cache);
  EXPECT_TRUE(device_profile(o).from_cache);
}

TEST(DeviceProfiler, NeedsAModel) {
  ProfilerOptions o;
  EXPECT_THROW(device_profile(o), UsageError);
  o.model_path = (test_dir() / "nope.gguf").string();
  EXPECT_THROW(device_profile(o), IoError);
}

TEST(ProfileCli, JsonLoadsWithTheDevicesLoader) {
  const auto model = make_model("cli.gguf");
  const std::string cmd = std::string(HEARTH_BIN_PATH) + " profile -m " + model +
                          " -t 1 --json --cache-dir " + (test_dir() / "cli-cache").string() +
                          " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_EQ(status, 0) << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const auto last = out.substr(out.rfind('\n') + 1);
  const auto j = nlohmann::json::parse(last);
  const auto d = device_from_json(j, "hearth profile --json");
  EXPECT_GT(d.cpu.mem_read_bps, 0);
  EXPECT_GT(d.disk_seq_read_bps, 0);
  EXPECT_EQ(std::string(os_class_name(d.os)), "linux");
  // The whole DEVICES.json document with this one device loads too.
  const auto set = devices_from_json(nlohmann::json{{"schema", 1}, {"devices", {j}}}, "doc");
  ASSERT_EQ(set.devices.size(), 1u);
  EXPECT_NE(out.find("matvec GFLOP/s"), std::string::npos) << out;
}

}  // namespace
}  // namespace hearth::profiler
