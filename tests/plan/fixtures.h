// Devices and models for planner tests: hand-made profiles with round numbers, and a seeded
// generator of random heterogeneous rings.
#pragma once

#include <random>
#include <string>

#include "hearth/model/presets.h"
#include "hearth/plan/cost_model.h"
#include "hearth/profiler/model_profiler.h"

namespace hearth::plan::test {

using gguf::TensorType;
using profile::DeviceProfile;
using profile::GpuKind;
using profile::OsClass;

inline profile::TypeThroughput flat(double flops) {
  profile::TypeThroughput t;
  for (auto type : {TensorType::kF32, TensorType::kF16, TensorType::kQ4_0, TensorType::kQ8_0,
                    TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    t[type] = flops;
  }
  return t;
}

// A CPU-only Linux device with round numbers.
inline DeviceProfile cpu_device(std::string name, double ram_bytes, double gflops = 100,
                                double disk_bps = 1e9) {
  DeviceProfile d;
  d.name = std::move(name);
  d.os = OsClass::kLinux;
  d.cores = 8;
  d.ram_total_bytes = d.ram_available_bytes = static_cast<uint64_t>(ram_bytes);
  d.disk_seq_read_bps = d.disk_random_read_bps = disk_bps;
  d.cpu.flops = flat(gflops * 1e9);
  d.cpu.mem_read_bps = 1e10;
  d.cpu.kv_copy_s = 1e-5;
  d.link.rtt_s = 4e-3;
  d.link.bandwidth_bps = 1e6;
  return d;
}

inline void add_gpu(DeviceProfile& d, GpuKind kind, double vram_bytes, double gflops = 1000) {
  d.gpu.kind = kind;
  d.gpu.vram_total_bytes = d.gpu.vram_available_bytes = static_cast<uint64_t>(vram_bytes);
  d.gpu.flops = flat(gflops * 1e9);
  d.gpu.mem_read_bps = 1e11;
  d.gpu.kv_copy_s = 2e-5;
  d.gpu.uma = kind == GpuKind::kMetal;
  d.gpu.ram_to_vram_s = d.gpu.vram_to_ram_s = d.gpu.uma ? 0.0 : 1e-4;
  if (kind == GpuKind::kMetal) d.os = OsClass::kMac;
}

// A model with round numbers: L layers of 1e9 bytes and 1e9 q4_k FLOPs each, 1e6 KV bytes per
// layer at ctx 1000, vocab 1000, input 1e8 bytes, output 2e8 bytes and 2e8 q6_k FLOPs, stream
// units of 2.5e8 bytes.
inline profile::ModelProfile round_model(uint32_t L) {
  profile::ModelProfile m;
  m.name = "round";
  m.n_layers = L;
  m.dim = 1000;
  m.vocab = 1000;
  profile::LayerProfile lp;
  lp.flops[TensorType::kQ4_K] = 1e9;
  lp.bytes[TensorType::kQ4_K] = 1000000000;
  lp.total_bytes = 1000000000;
  m.layers.assign(L, lp);
  m.mean_layer = lp;
  m.layer_bytes = 1e9;
  m.input_bytes = 100000000;
  m.output_bytes = 200000000;
  m.output_flops[TensorType::kQ6_K] = 2e8;
  m.attn_flops_per_kv_token = 0;
  m.kv_bytes_per_token = 1000;
  m.hidden_bytes = 4000;
  m.compute_buffer_cpu = 10000000;
  m.compute_buffer_gpu = 20000000;
  m.stream_unit_bytes = 250000000;  // a quarter of a layer
  return m;
}

// A random ring of 1..max_devices devices around an L-layer slice of a Llama-3-8B-shaped
// model: memory from a tenth to all of the model per device, some GPUs, some slow disks.
inline Problem random_problem(std::mt19937_64& rng, uint32_t L, size_t devices,
                              CostModel model = CostModel::kPaper,
                              std::string_view preset = "llama3-8b") {
  auto hp = model::find_preset(preset).hparams;
  hp.n_layers = L;
  Problem p;
  p.model = profiler::profile_model(hp, profiler::weight_types_for_scheme(hp, "q4_k_m"), "rand");
  p.options.ctx = 1024;
  p.options.model = model;
  const double model_bytes = p.model.total_weight_bytes();
  std::uniform_real_distribution<double> u(0, 1);
  auto logu = [&](double lo, double hi) { return lo * std::pow(hi / lo, u(rng)); };
  for (size_t i = 0; i < devices; ++i) {
    auto d = cpu_device("d" + std::to_string(i), logu(0.1, 1.0) * model_bytes, logu(20, 400),
                        logu(0.05e9, 4e9));
    const double os = u(rng);
    d.os = os < 0.5    ? OsClass::kLinux
           : os < 0.7  ? OsClass::kMac
           : os < 0.85 ? OsClass::kAndroid
                       : OsClass::kWindows;
    if (d.os == OsClass::kAndroid) {
      d.swap_available_bytes = static_cast<uint64_t>(logu(0.01, 0.3) * model_bytes);
      d.swappable_bytes = static_cast<uint64_t>(logu(0.01, 0.3) * model_bytes);
    }
    d.disk_random_read_bps = d.disk_seq_read_bps * logu(0.3, 1.0);
    d.cpu.mem_read_bps = logu(10e9, 100e9);
    d.link.rtt_s = logu(1e-3, 10e-3);
    d.link.bandwidth_bps = logu(20e6, 100e6);
    const double g = u(rng);
    if (g < 0.25) {
      d.os = d.os == OsClass::kMac ? OsClass::kLinux : d.os;
      add_gpu(d, GpuKind::kCuda, logu(0.05, 0.8) * model_bytes, logu(500, 10000));
    } else if (g < 0.4) {
      add_gpu(d, GpuKind::kMetal, logu(0.1, 1.0) * model_bytes, logu(500, 5000));
    }
    // Every other device's disk serves 20 ms of reading at once after an idle gap (a
    // throttle's time slice); no draw from rng, so the rest of each instance is unchanged.
    if (i % 2 == 1) d.disk_burst_bytes = 0.02 * d.disk_seq_read_bps;
    // And every fourth reads that burst at twice its rate (the others at once).
    if (i % 4 == 1) d.disk_peak_read_bps = 2 * d.disk_seq_read_bps;
    d.head = i == 0;
    p.devices.push_back(std::move(d));
  }
  return p;
}

}  // namespace hearth::plan::test
