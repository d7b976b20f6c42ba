#include "hearth/profile/device_profile.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"

namespace hearth::profile {

namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr double kMiB = 1024.0 * 1024.0;

[[noreturn]] void fail(const std::string& where, const std::string& field, const std::string& why) {
  throw FormatError(where + ": field '" + field + "' " + why);
}

// A number >= 0 (and finite); nullopt when absent and not required.
std::optional<double> number(const json& j, const std::string& key, const std::string& where,
                             bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(where, key, "is missing");
    return std::nullopt;
  }
  if (!it->is_number()) fail(where, key, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) fail(where, key, "must be finite");
  if (v < 0) fail(where, key, "must not be negative (got " + it->dump() + ")");
  return v;
}

double positive(const json& j, const std::string& key, const std::string& where) {
  const double v = *number(j, key, where, true);
  if (v <= 0) fail(where, key, "must be positive");
  return v;
}

uint64_t gib_bytes(double gib) {
  return static_cast<uint64_t>(std::llround(gib * kGiB));
}

TypeThroughput throughput_from_json(const json& j, const std::string& where) {
  if (!j.is_object() || j.empty())
    fail(where, "gflops", "must be a non-empty object {type: GFLOPS}");
  TypeThroughput out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    auto type = gguf::tensor_type_from_name(it.key());
    if (!type) fail(where, "gflops." + it.key(), "is not a known weight type");
    const double g = positive(j, it.key(), where + ".gflops");
    out[*type] = g * 1e9;
  }
  return out;
}

json throughput_to_json(const TypeThroughput& t) {
  json out = json::object();
  for (const auto& [type, flops] : t) out[std::string(gguf::tensor_type_name(type))] = flops / 1e9;
  return out;
}

OsClass os_from_name(const std::string& s, const std::string& where) {
  if (s == "linux") return OsClass::kLinux;
  if (s == "mac" || s == "macos") return OsClass::kMac;
  if (s == "android") return OsClass::kAndroid;
  if (s == "windows") return OsClass::kWindows;
  fail(where, "os", "must be one of linux, mac, android, windows (got '" + s + "')");
}

GpuKind gpu_from_name(const std::string& s, const std::string& where) {
  if (s == "none") return GpuKind::kNone;
  if (s == "cuda") return GpuKind::kCuda;
  if (s == "metal") return GpuKind::kMetal;
  fail(where, "gpu.kind", "must be one of none, cuda, metal (got '" + s + "')");
}

std::string string_field(const json& j, const std::string& key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) fail(where, key, "is missing");
  if (!it->is_string()) fail(where, key, "must be a string");
  return it->get<std::string>();
}

}  // namespace

const char* os_class_name(OsClass os) {
  static constexpr EnumName<OsClass> kNames[] = {{OsClass::kLinux, "linux"},
                                                 {OsClass::kMac, "mac"},
                                                 {OsClass::kAndroid, "android"},
                                                 {OsClass::kWindows, "windows"}};
  return enum_name(kNames, os).data();
}

const char* gpu_kind_name(GpuKind kind) {
  static constexpr EnumName<GpuKind> kNames[] = {
      {GpuKind::kNone, "none"}, {GpuKind::kCuda, "cuda"}, {GpuKind::kMetal, "metal"}};
  return enum_name(kNames, kind).data();
}

bool DeviceProfile::can_reach(const std::string& other) const {
  return reachable.empty() ||
         std::find(reachable.begin(), reachable.end(), other) != reachable.end();
}

DeviceProfile device_from_json(const json& j, const std::string& where_in) {
  if (!j.is_object()) throw FormatError(where_in + ": a device must be a JSON object");
  DeviceProfile d;
  d.name = string_field(j, "name", where_in);
  if (d.name.empty()) fail(where_in, "name", "must not be empty");
  const std::string where = where_in + " (device '" + d.name + "')";
  if (auto it = j.find("head"); it != j.end()) {
    if (!it->is_boolean()) fail(where, "head", "must be true or false");
    d.head = it->get<bool>();
  }
  d.os = os_from_name(string_field(j, "os", where), where);
  d.cores = static_cast<uint32_t>(number(j, "cores", where, false).value_or(0));
  d.ram_available_bytes = gib_bytes(*number(j, "ram_available_gib", where, true));
  d.ram_total_bytes =
      gib_bytes(number(j, "ram_total_gib", where, false).value_or(d.ram_available_bytes / kGiB));
  if (d.ram_total_bytes < d.ram_available_bytes)
    fail(where, "ram_total_gib", "is below ram_available_gib");
  d.swap_available_bytes = gib_bytes(number(j, "swap_available_gib", where, false).value_or(0));
  d.swappable_bytes = gib_bytes(number(j, "swappable_gib", where, false).value_or(0));
  d.disk_seq_read_bps = positive(j, "disk_seq_read_gbps", where) * kGB;
  d.disk_random_read_bps =
      number(j, "disk_random_read_gbps", where, false).value_or(d.disk_seq_read_bps / kGB) * kGB;
  if (d.disk_random_read_bps <= 0) fail(where, "disk_random_read_gbps", "must be positive");
  d.disk_burst_bytes = number(j, "disk_burst_mib", where, false).value_or(0) * kMiB;
  if (d.disk_burst_bytes > 1e6 * kMiB) fail(where, "disk_burst_mib", "must be at most 1e6");
  d.disk_peak_read_bps = number(j, "disk_peak_read_gbps", where, false).value_or(0) * kGB;
  if (d.disk_peak_read_bps > 0 && d.disk_peak_read_bps < d.disk_seq_read_bps)
    fail(where, "disk_peak_read_gbps", "is below disk_seq_read_gbps");

  auto cpu = j.find("cpu");
  if (cpu == j.end() || !cpu->is_object()) fail(where, "cpu", "is missing (an object)");
  const std::string cw = where + ".cpu";
  if (cpu->find("gflops") == cpu->end()) fail(cw, "gflops", "is missing");
  d.cpu.flops = throughput_from_json((*cpu)["gflops"], cw);
  if (auto mm = cpu->find("matmul_gflops"); mm != cpu->end()) {
    d.cpu.matmul_flops = throughput_from_json(*mm, cw + ".matmul");
  }
  d.cpu.mem_read_bps = positive(*cpu, "mem_read_gbps", cw) * kGB;
  d.cpu.kv_copy_s = number(*cpu, "kv_copy_ms", cw, false).value_or(0) / 1e3;

  if (auto gpu = j.find("gpu"); gpu != j.end() && !gpu->is_null()) {
    if (!gpu->is_object()) fail(where, "gpu", "must be an object");
    const std::string gw = where + ".gpu";
    d.gpu.kind = gpu_from_name(string_field(*gpu, "kind", gw), gw);
    if (d.gpu.kind != GpuKind::kNone) {
      d.gpu.vram_available_bytes = gib_bytes(*number(*gpu, "vram_available_gib", gw, true));
      d.gpu.vram_total_bytes = gib_bytes(
          number(*gpu, "vram_total_gib", gw, false).value_or(d.gpu.vram_available_bytes / kGiB));
      if (gpu->find("gflops") == gpu->end()) fail(gw, "gflops", "is missing");
      d.gpu.flops = throughput_from_json((*gpu)["gflops"], gw);
      d.gpu.mem_read_bps = positive(*gpu, "mem_read_gbps", gw) * kGB;
      d.gpu.kv_copy_s = number(*gpu, "kv_copy_ms", gw, false).value_or(0) / 1e3;
      d.gpu.ram_to_vram_s = number(*gpu, "ram_to_vram_ms", gw, false).value_or(0) / 1e3;
      d.gpu.vram_to_ram_s = number(*gpu, "vram_to_ram_ms", gw, false).value_or(0) / 1e3;
      if (auto uma = gpu->find("uma"); uma != gpu->end()) {
        if (!uma->is_boolean()) fail(gw, "uma", "must be true or false");
        d.gpu.uma = uma->get<bool>();
      } else {
        d.gpu.uma = d.gpu.kind == GpuKind::kMetal;
      }
    }
  }
  if (d.gpu.kind == GpuKind::kMetal && d.os != OsClass::kMac)
    fail(where, "gpu.kind", "metal needs os mac");

  auto link = j.find("link");
  if (link == j.end() || !link->is_object()) fail(where, "link", "is missing (an object)");
  const std::string lw = where + ".link";
  d.link.rtt_s = *number(*link, "rtt_ms", lw, true) / 1e3;
  d.link.bandwidth_bps = positive(*link, "bandwidth_mbps", lw) * 1e6 / 8.0;

  if (auto r = j.find("reachable"); r != j.end()) {
    if (!r->is_array()) fail(where, "reachable", "must be an array of device names");
    for (const auto& x : *r) {
      if (!x.is_string()) fail(where, "reachable", "must be an array of device names");
      d.reachable.push_back(x.get<std::string>());
    }
  }
  if (auto n = j.find("notes"); n != j.end() && n->is_string()) d.notes = n->get<std::string>();
  return d;
}

json device_to_json(const DeviceProfile& d) {
  json j;
  j["name"] = d.name;
  if (d.head) j["head"] = true;
  j["os"] = os_class_name(d.os);
  j["cores"] = d.cores;
  j["ram_total_gib"] = d.ram_total_bytes / kGiB;
  j["ram_available_gib"] = d.ram_available_bytes / kGiB;
  j["swap_available_gib"] = d.swap_available_bytes / kGiB;
  j["swappable_gib"] = d.swappable_bytes / kGiB;
  j["disk_seq_read_gbps"] = d.disk_seq_read_bps / kGB;
  j["disk_random_read_gbps"] = d.disk_random_read_bps / kGB;
  j["disk_burst_mib"] = d.disk_burst_bytes / kMiB;
  if (d.disk_peak_read_bps > 0) j["disk_peak_read_gbps"] = d.disk_peak_read_bps / kGB;
  j["cpu"] = {{"gflops", throughput_to_json(d.cpu.flops)},
              {"mem_read_gbps", d.cpu.mem_read_bps / kGB},
              {"kv_copy_ms", d.cpu.kv_copy_s * 1e3}};
  if (!d.cpu.matmul_flops.empty())
    j["cpu"]["matmul_gflops"] = throughput_to_json(d.cpu.matmul_flops);
  if (d.has_gpu()) {
    j["gpu"] = {{"kind", gpu_kind_name(d.gpu.kind)},
                {"vram_total_gib", d.gpu.vram_total_bytes / kGiB},
                {"vram_available_gib", d.gpu.vram_available_bytes / kGiB},
                {"gflops", throughput_to_json(d.gpu.flops)},
                {"mem_read_gbps", d.gpu.mem_read_bps / kGB},
                {"kv_copy_ms", d.gpu.kv_copy_s * 1e3},
                {"ram_to_vram_ms", d.gpu.ram_to_vram_s * 1e3},
                {"vram_to_ram_ms", d.gpu.vram_to_ram_s * 1e3},
                {"uma", d.gpu.uma}};
  } else {
    j["gpu"] = {{"kind", "none"}};
  }
  j["link"] = {{"rtt_ms", d.link.rtt_s * 1e3},
               {"bandwidth_mbps", d.link.bandwidth_bps * 8.0 / 1e6}};
  if (!d.reachable.empty()) j["reachable"] = d.reachable;
  if (!d.notes.empty()) j["notes"] = d.notes;
  return j;
}

DeviceSet devices_from_json(const json& j, const std::string& source) {
  if (!j.is_object())
    throw FormatError(source + ": top level must be an object {\"schema\", \"devices\"}");
  auto schema = j.find("schema");
  if (schema == j.end()) fail(source, "schema", "is missing");
  if (!schema->is_number_integer() || schema->get<int64_t>() != kDevicesSchemaVersion) {
    fail(source, "schema",
         "must be " + std::to_string(kDevicesSchemaVersion) + " (got " + schema->dump() + ")");
  }
  auto devs = j.find("devices");
  if (devs == j.end() || !devs->is_array()) fail(source, "devices", "must be an array");
  if (devs->empty()) fail(source, "devices", "must list at least one device");
  DeviceSet set;
  std::set<std::string> names;
  size_t head = 0;
  int heads = 0;
  for (size_t i = 0; i < devs->size(); ++i) {
    auto d = device_from_json((*devs)[i], source + ": devices[" + std::to_string(i) + "]");
    if (!names.insert(d.name).second)
      fail(source, "devices[" + std::to_string(i) + "].name", "'" + d.name + "' is used twice");
    if (d.head) {
      head = i;
      ++heads;
    }
    set.devices.push_back(std::move(d));
  }
  if (heads > 1) fail(source, "head", "is set on more than one device");
  for (const auto& d : set.devices) {
    for (const auto& r : d.reachable) {
      if (!names.count(r))
        fail(source, "reachable", "of device '" + d.name + "' names unknown device '" + r + "'");
    }
  }
  // Rotate so the head is rank 0; ring order is cyclic, so nothing else changes.
  std::rotate(set.devices.begin(), set.devices.begin() + static_cast<std::ptrdiff_t>(head),
              set.devices.end());
  set.devices[0].head = true;
  // Every hop of the ring as written must be a direct link, or the ring cannot run at all.
  for (size_t i = 0; i < set.devices.size() && set.devices.size() > 1; ++i) {
    const auto& a = set.devices[i];
    const auto& b = set.devices[(i + 1) % set.devices.size()];
    if (!a.can_reach(b.name)) {
      fail(source, "reachable",
           "device '" + a.name + "' cannot reach its ring successor '" + b.name + "'");
    }
  }
  return set;
}

json devices_to_json(const DeviceSet& set) {
  json devs = json::array();
  for (const auto& d : set.devices) devs.push_back(device_to_json(d));
  return {{"schema", kDevicesSchemaVersion}, {"devices", devs}};
}

DeviceSet load_devices_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(errno_message("cannot open devices file " + path));
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw FormatError(path + ": not valid JSON at byte " + std::to_string(e.byte) + ": " +
                      e.what());
  }
  return devices_from_json(j, path);
}

DeviceProfile load_device_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("{}: cannot open", path));
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw FormatError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return device_from_json(j, path);
}

}  // namespace hearth::profile
