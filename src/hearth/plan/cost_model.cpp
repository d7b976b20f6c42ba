#include "hearth/plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "hearth/base/error.h"

namespace hearth::plan {

namespace {

using profile::DeviceProfile;
using profile::GpuKind;
using profile::OsClass;

// Seconds to run `flops` (by weight type) at `speed` (FLOP/s by type).
double flop_time(const std::map<gguf::TensorType, double>& flops,
                 const profile::TypeThroughput& speed) {
  double t = 0;
  for (const auto& [type, f] : flops) {
    if (f > 0) t += f / speed.at(type);
  }
  return t;
}

// FLOPs of one layer at context `ctx`: weights by their type, attention on the f16 KV cache.
std::map<gguf::TensorType, double> layer_flops(const profile::ModelProfile& m, uint32_t ctx) {
  auto f = m.mean_layer.flops;
  f[gguf::TensorType::kF16] += m.attn_flops_per_kv_token * ctx;
  return f;
}

std::string fmt_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

double disk_read_bps(const DeviceProfile& d) {
  // Linux and Android mmap the model with sequential read-ahead (paper A.3, Eq. 15); macOS
  // pages in at random-read speed; Windows has no sequential advice for mapped files.
  return d.os == OsClass::kLinux || d.os == OsClass::kAndroid ? d.disk_seq_read_bps
                                                              : d.disk_random_read_bps;
}

double link_latency_s(const DeviceProfile& d, uint64_t hidden_bytes) {
  // One hop carries one hidden state: half a round trip plus the transfer.
  return d.link.rtt_s / 2.0 + static_cast<double>(hidden_bytes) / d.link.bandwidth_bps;
}

void check_problem(const Problem& p) {
  if (p.devices.empty()) throw UsageError("no devices to plan for");
  if (p.model.n_layers == 0 || p.model.layers.empty()) throw UsageError("model has no layers");
  if (!p.devices[0].head)
    throw UsageError("device '" + p.devices[0].name + "' must be the head (rank 0)");
  auto need = layer_flops(p.model, p.options.ctx);
  for (const auto& d : p.devices) {
    for (const auto& [type, f] : need) {
      if (f > 0 && !d.cpu.flops.count(type)) {
        throw UsageError("device '" + d.name + "' has no cpu.gflops for weight type '" +
                         std::string(gguf::tensor_type_name(type)) + "' that model '" +
                         p.model.name + "' uses");
      }
      if (f > 0 && d.has_gpu() && !d.gpu.flops.count(type)) {
        throw UsageError("device '" + d.name + "' has no gpu.gflops for weight type '" +
                         std::string(gguf::tensor_type_name(type)) + "'");
      }
    }
    for (const auto& [type, f] : p.model.output_flops) {
      if (f > 0 && d.head && !d.cpu.flops.count(type)) {
        throw UsageError("head device '" + d.name + "' has no cpu.gflops for output type '" +
                         std::string(gguf::tensor_type_name(type)) + "'");
      }
    }
    if (d.cpu.mem_read_bps <= 0)
      throw UsageError("device '" + d.name + "' has no cpu memory bandwidth");
    if (d.has_gpu() && d.gpu.mem_read_bps <= 0)
      throw UsageError("device '" + d.name + "' has no gpu memory bandwidth");
    if (disk_read_bps(d) <= 0) throw UsageError("device '" + d.name + "' has no disk throughput");
    if (d.link.bandwidth_bps <= 0)
      throw UsageError("device '" + d.name + "' has no link bandwidth");
  }
}

DeviceTerms device_terms(const Problem& p, size_t m, double l, double l_gpu, double windows,
                         double hops, MemCase mc) {
  const DeviceProfile& d = p.devices[m];
  const auto& mp = p.model;
  const bool head = m == 0;
  const double ctx = p.options.ctx;
  const double b = mp.layer_bytes;                                     // weights of one layer
  const double kv = static_cast<double>(mp.kv_bytes_per_token) * ctx;  // KV of one layer
  const double b_kv = b + kv;                                          // b'
  const double lookup = head ? static_cast<double>(mp.input_bytes) / mp.vocab : 0.0;  // b_i / V
  const double io = head ? lookup + static_cast<double>(mp.output_bytes) : 0.0;
  const double c_cpu = static_cast<double>(mp.compute_buffer_cpu);
  const double c_gpu = static_cast<double>(mp.compute_buffer_gpu);
  const double l_cpu = l - l_gpu;
  const bool metal = d.gpu.kind == GpuKind::kMetal;
  const double s_disk = disk_read_bps(d);

  DeviceTerms t;
  // Eq. 12: layers on each backend, plus the output layer on the head's CPU.
  const auto f = layer_flops(mp, p.options.ctx);
  t.compute_s = l_cpu * flop_time(f, d.cpu.flops);
  if (l_gpu != 0 && d.has_gpu()) t.compute_s += l_gpu * flop_time(f, d.gpu.flops);
  if (head) t.compute_s += flop_time(mp.output_flops, d.cpu.flops);

  // Eq. 13-14: KV append, host<->device copies per window, streaming weights + KV.
  t.memory_s = l_cpu * d.cpu.kv_copy_s + l_cpu * b_kv / d.cpu.mem_read_bps;
  if (d.has_gpu()) {
    if (l_gpu != 0) t.memory_s += l_gpu * d.gpu.kv_copy_s + l_gpu * b_kv / d.gpu.mem_read_bps;
    if (!d.gpu.uma) t.memory_s += windows * (d.gpu.ram_to_vram_s + d.gpu.vram_to_ram_s);
  }
  if (head) t.memory_s += io / d.cpu.mem_read_bps;

  // Memory the mmapped weights need against what the OS leaves them.
  if (metal) {
    t.ram_need = l * b_kv + io + c_cpu + c_gpu;
    t.ram_cap = static_cast<double>(d.gpu.vram_available_bytes);
    t.pinned_need = l * kv + c_cpu + c_gpu;
  } else {
    t.ram_need = l_cpu * b_kv + io + c_cpu;
    t.ram_cap = static_cast<double>(d.ram_available_bytes);
    if (d.os == OsClass::kAndroid) {
      // Android swaps other apps out before dropping our pages (Eq. 17).
      t.ram_cap += static_cast<double>(std::min(d.swappable_bytes, d.swap_available_bytes));
    }
    t.pinned_need = l_cpu * kv + c_cpu;
  }
  t.pinned_cap = t.ram_cap;
  if (d.gpu.kind == GpuKind::kCuda) {
    t.vram_need = l_gpu * b_kv + (l_gpu > 0 ? c_gpu : 0.0);
    t.vram_cap = static_cast<double>(d.gpu.vram_available_bytes);
  } else if (metal) {
    t.vram_need = l_gpu * b_kv + (l_gpu > 0 ? c_gpu + (head ? mp.output_bytes : 0.0) : 0.0);
    t.vram_cap = static_cast<double>(d.gpu.vram_available_bytes);
  } else {
    t.vram_need = l_gpu;  // any GPU layer on a device without a GPU is infeasible
    t.vram_cap = 0;
  }
  t.slow_disk = s_disk < p.options.slow_disk_bps;
  t.overloaded = mc == MemCase::kOverloaded || (mc == MemCase::kAuto && t.ram_need > t.ram_cap);

  // Eq. 15-18, with the max() split into the four sets.
  t.disk_s = lookup / s_disk;
  if (t.overloaded) {
    if (metal) {
      t.disk_s += (l * b + io) / s_disk;  // Metal drops and reloads the whole working set
    } else {
      t.disk_s += (t.ram_need - t.ram_cap) / s_disk;
    }
  }
  // Eq. 19: one hidden state per window to the next device.
  t.comm_s = hops * link_latency_s(d, mp.hidden_bytes);
  return t;
}

Prediction predict(const Problem& p, const std::vector<uint32_t>& w, const std::vector<uint32_t>& n,
                   const std::vector<bool>& relay_in) {
  const size_t M = p.devices.size();
  if (w.size() != M || n.size() != M)
    throw UsageError("plan has a different number of devices than the ring");
  std::vector<bool> relay = relay_in;
  relay.resize(M, false);
  Prediction out;
  const uint32_t L = p.model.n_layers;
  uint32_t W = 0;
  size_t members = 0;
  for (size_t m = 0; m < M; ++m) {
    if (n[m] > w[m]) throw UsageError("device '" + p.devices[m].name + "': n > w");
    W += w[m];
    members += (w[m] > 0 || relay[m]) ? 1 : 0;
  }
  if (W == 0) throw UsageError("plan assigns no layers");
  if (w[0] == 0) {
    out.feasible = false;
    out.reason = "the head '" + p.devices[0].name + "' must run at least one layer window";
  }
  out.W = W;
  out.k = (L + W - 1) / W;
  const uint32_t full = L / W;  // rounds in which every window is filled
  uint32_t rest = L % W;        // layers of the last, partial round, filled in ring order
  double total = 0;
  for (size_t m = 0; m < M; ++m) {
    DeviceCost dc;
    dc.w = w[m];
    dc.n = n[m];
    dc.relay = relay[m] && w[m] == 0;
    const uint32_t extra = std::min(w[m], rest);
    const uint32_t extra_gpu = std::min(n[m], extra);
    rest -= extra;
    dc.layers = full * w[m] + extra;
    dc.gpu_layers = full * n[m] + extra_gpu;
    dc.windows = w[m] == 0 ? 0 : full + (extra > 0 ? 1 : 0);
    if (w[m] == 0 && !dc.relay) {
      out.devices.push_back(dc);
      continue;
    }
    // A relay forwards the hidden state once per round; a lone device talks to nobody.
    const double hops = members <= 1 ? 0.0 : (dc.relay ? static_cast<double>(out.k) : dc.windows);
    DeviceTerms t;
    if (dc.relay) {
      t.comm_s = hops * link_latency_s(p.devices[m], p.model.hidden_bytes);
    } else {
      t = device_terms(p, m, dc.layers, dc.gpu_layers, dc.windows, hops, MemCase::kAuto);
      dc.overloaded = t.overloaded;
      dc.ram_need_bytes = t.ram_need;
      dc.ram_cap_bytes = t.ram_cap;
      const auto& name = p.devices[m].name;
      auto infeasible = [&](std::string why) {
        if (out.feasible) {
          out.feasible = false;
          out.reason = "device '" + name + "': " + why;
        }
      };
      if (t.vram_need > t.vram_cap) {
        infeasible(std::to_string(dc.gpu_layers) + " GPU layers need " + fmt_gib(t.vram_need) +
                   " of VRAM, " + fmt_gib(t.vram_cap) + " available");
      }
      if (t.pinned_need > t.pinned_cap) {
        infeasible("KV cache and buffers need " + fmt_gib(t.pinned_need) + ", only " +
                   fmt_gib(t.pinned_cap) + " available");
      }
      if (t.overloaded && t.slow_disk) {
        infeasible("weights overflow RAM by " + fmt_gib(t.ram_need - t.ram_cap) +
                   " and its disk is too slow to reload them");
      }
    }
    dc.compute_s = t.compute_s;
    dc.memory_s = t.memory_s;
    dc.disk_s = t.disk_s;
    dc.comm_s = t.comm_s;
    total += dc.total_s();
    out.devices.push_back(dc);
  }
  out.tpot_s = total;
  return out;
}

}  // namespace hearth::plan
