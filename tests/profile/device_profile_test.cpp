// DEVICES.json: round trip, the paper testbeds, and bad documents that must fail with a
// message naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "hearth/base/error.h"
#include "hearth/profile/device_profile.h"
#include "support/scratch_dir.h"

namespace hearth::profile {
namespace {

using nlohmann::json;

json good_device(const std::string& name) {
  auto j = json::parse(R"({
    "name": "X", "os": "linux", "cores": 8, "ram_available_gib": 4.1, "ram_total_gib": 16,
    "disk_seq_read_gbps": 3.0,
    "cpu": {"gflops": {"q4_k": 100, "q6_k": 90, "f32": 50, "f16": 60}, "mem_read_gbps": 35, "kv_copy_ms": 0.002},
    "gpu": {"kind": "cuda", "vram_available_gib": 8, "gflops": {"q4_k": 5000, "q6_k": 5000, "f32": 6000, "f16": 8000},
            "mem_read_gbps": 370, "ram_to_vram_ms": 0.02, "vram_to_ram_ms": 0.02},
    "link": {"rtt_ms": 5, "bandwidth_mbps": 450}
  })");
  j["name"] = name;
  return j;
}

json doc(std::vector<json> devices) {
  return {{"schema", 1}, {"devices", devices}};
}

std::string error_of(const json& j) {
  try {
    devices_from_json(j, "DEVICES.json");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

TEST(DevicesJson, ParsesUnitsAndRoundTrips) {
  auto set = devices_from_json(doc({good_device("a"), good_device("b")}), "t");
  ASSERT_EQ(set.devices.size(), 2u);
  const auto& d = set.devices[0];
  EXPECT_TRUE(d.head);  // no head marked: the first device is the head
  EXPECT_EQ(d.ram_available_bytes, static_cast<uint64_t>(4.1 * 1024 * 1024 * 1024 + 0.5));
  EXPECT_DOUBLE_EQ(d.disk_seq_read_bps, 3e9);
  EXPECT_DOUBLE_EQ(d.disk_random_read_bps, 3e9);  // defaults to the sequential figure
  EXPECT_EQ(d.disk_burst_bytes, 0.0);             // absent: a disk of constant rate
  EXPECT_DOUBLE_EQ(d.cpu.flops.at(gguf::TensorType::kQ4_K), 100e9);
  EXPECT_DOUBLE_EQ(d.link.bandwidth_bps, 450e6 / 8);
  EXPECT_DOUBLE_EQ(d.link.rtt_s, 5e-3);
  EXPECT_EQ(d.gpu.kind, GpuKind::kCuda);
  EXPECT_FALSE(d.gpu.uma);
  const auto again = devices_from_json(devices_to_json(set), "t2");
  ASSERT_EQ(again.devices.size(), 2u);
  EXPECT_EQ(again.devices[1].name, "b");
  EXPECT_EQ(again.devices[0].ram_available_bytes, d.ram_available_bytes);
  EXPECT_NEAR(again.devices[0].gpu.ram_to_vram_s, d.gpu.ram_to_vram_s, 1e-15);
  EXPECT_EQ(again.devices[0].cpu.flops, d.cpu.flops);

  auto bursty = good_device("a");
  bursty["disk_burst_mib"] = 12.5;
  const auto b = devices_from_json(doc({bursty}), "t3");
  EXPECT_DOUBLE_EQ(b.devices[0].disk_burst_bytes, 12.5 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(devices_from_json(devices_to_json(b), "t4").devices[0].disk_burst_bytes,
                   b.devices[0].disk_burst_bytes);
  EXPECT_EQ(b.devices[0].disk_peak_read_bps, 0.0);  // absent: not measured
  bursty["disk_peak_read_gbps"] = 25.0;
  const auto pk = devices_from_json(doc({bursty}), "t5");
  EXPECT_DOUBLE_EQ(pk.devices[0].disk_peak_read_bps, 25e9);
  EXPECT_DOUBLE_EQ(devices_from_json(devices_to_json(pk), "t6").devices[0].disk_peak_read_bps,
                   25e9);

  // The matmul (prefill) rates: optional, per type, round-tripped.
  EXPECT_TRUE(d.cpu.matmul_flops.empty());
  auto mm = good_device("a");
  mm["cpu"]["matmul_gflops"] = {{"q4_k", 400}, {"q8_0", 500}};
  const auto m = devices_from_json(doc({mm}), "t7");
  EXPECT_DOUBLE_EQ(m.devices[0].cpu.matmul_flops.at(gguf::TensorType::kQ8_0), 500e9);
  EXPECT_EQ(devices_from_json(devices_to_json(m), "t8").devices[0].cpu.matmul_flops,
            m.devices[0].cpu.matmul_flops);
  mm["cpu"]["matmul_gflops"]["q9_z"] = 1;
  try {
    devices_from_json(doc({mm}), "t9");
    ADD_FAILURE() << "an unknown matmul type was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q9_z"), std::string::npos) << e.what();
  }
}

TEST(DevicesJson, HeadIsRotatedToRankZeroKeepingRingOrder) {
  auto c = good_device("c");
  c["head"] = true;
  auto set = devices_from_json(doc({good_device("a"), good_device("b"), c, good_device("d")}), "t");
  std::vector<std::string> names;
  for (const auto& d : set.devices) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c", "d", "a", "b"}));
  EXPECT_TRUE(set.devices[0].head);
}

TEST(DevicesJson, BadDocumentsNameTheFieldAtFault) {
  auto missing = good_device("a");
  missing.erase("ram_available_gib");
  EXPECT_NE(error_of(doc({missing})).find("ram_available_gib"), std::string::npos);
  EXPECT_NE(error_of(doc({missing})).find("'a'"), std::string::npos);

  auto negative = good_device("a");
  negative["ram_available_gib"] = -1;
  EXPECT_NE(error_of(doc({negative})).find("must not be negative"), std::string::npos);

  EXPECT_NE(error_of(doc({})).find("at least one device"), std::string::npos);
  EXPECT_NE(error_of(json{{"devices", json::array({good_device("a")})}}).find("schema"),
            std::string::npos);
  EXPECT_NE(
      error_of(json{{"schema", 2}, {"devices", json::array({good_device("a")})}}).find("schema"),
      std::string::npos);
  EXPECT_NE(error_of(doc({good_device("a"), good_device("a")})).find("twice"), std::string::npos);

  auto h1 = good_device("a"), h2 = good_device("b");
  h1["head"] = h2["head"] = true;
  EXPECT_NE(error_of(doc({h1, h2})).find("more than one"), std::string::npos);

  auto bad_type = good_device("a");
  bad_type["cpu"]["gflops"]["q9_z"] = 1;
  EXPECT_NE(error_of(doc({bad_type})).find("q9_z"), std::string::npos);

  auto bad_os = good_device("a");
  bad_os["os"] = "plan9";
  EXPECT_NE(error_of(doc({bad_os})).find("os"), std::string::npos);

  auto no_link = good_device("a");
  no_link.erase("link");
  EXPECT_NE(error_of(doc({no_link})).find("link"), std::string::npos);

  auto huge_burst = good_device("a");
  huge_burst["disk_burst_mib"] = 2e6;
  EXPECT_NE(error_of(doc({huge_burst})).find("disk_burst_mib"), std::string::npos);

  auto slow_peak = good_device("a");  // a peak below the sustained rate is no peak
  slow_peak["disk_peak_read_gbps"] = slow_peak["disk_seq_read_gbps"].get<double>() / 2;
  EXPECT_NE(error_of(doc({slow_peak})).find("disk_peak_read_gbps"), std::string::npos);

  auto zero_bw = good_device("a");
  zero_bw["link"]["bandwidth_mbps"] = 0;
  EXPECT_NE(error_of(doc({zero_bw})).find("bandwidth_mbps"), std::string::npos);

  auto metal_linux = good_device("a");
  metal_linux["gpu"]["kind"] = "metal";
  EXPECT_NE(error_of(doc({metal_linux})).find("metal"), std::string::npos);

  auto unreachable = good_device("a");
  unreachable["reachable"] = json::array({"a"});
  EXPECT_NE(error_of(doc({unreachable, good_device("b")})).find("cannot reach"), std::string::npos);
  auto unknown = good_device("a");
  unknown["reachable"] = json::array({"zz"});
  EXPECT_NE(error_of(doc({unknown, good_device("b")})).find("zz"), std::string::npos);

  auto text_number = good_device("a");
  text_number["ram_available_gib"] = "4";
  EXPECT_NE(error_of(doc({text_number})).find("must be a number"), std::string::npos);
}

TEST(DevicesJson, FilesThatAreNotJsonOrMissingFail) {
  EXPECT_THROW(load_devices_file("/nonexistent/DEVICES.json"), IoError);
  const auto path = hearth::testing::scratch_dir() / "hearth_plan_bad_devices.json";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{\"schema\": 1, \"devices\": [", f);
    std::fclose(f);
  }
  try {
    load_devices_file(path);
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST(DevicesJson, EveryPaperTestbedLoads) {
  const std::string dir = std::string(HEARTH_SOURCE_DIR) + "/bench/testbeds/";
  const std::map<std::string, size_t> expect = {
      {"paper-table3.json", 6}, {"paper-table3-d1-d4.json", 4}, {"paper-table11.json", 10},
      {"paper-a4.json", 4},     {"paper-a10.json", 4},          {"paper-a14.json", 4}};
  for (const auto& [file, n] : expect) {
    const auto set = load_devices_file(dir + file);
    EXPECT_EQ(set.devices.size(), n) << file;
    for (const auto& d : set.devices) EXPECT_FALSE(d.notes.empty()) << file << " " << d.name;
  }
  // Published figures survive the trip through JSON (Table 3: D3 has 9.7 GiB and 11 GiB VRAM).
  const auto t3 = load_devices_file(dir + "paper-table3.json");
  EXPECT_NEAR(t3.devices[2].ram_available_bytes / (1024.0 * 1024 * 1024), 9.7, 1e-9);
  EXPECT_NEAR(t3.devices[2].gpu.vram_available_bytes / (1024.0 * 1024 * 1024), 11, 1e-9);
  EXPECT_NEAR(t3.devices[5].disk_seq_read_bps, 0.39e9, 1);
}

}  // namespace
}  // namespace hearth::profile
