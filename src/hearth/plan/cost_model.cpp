#include "hearth/plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/residency/stream_plan.h"

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

constexpr EnumName<CostModel> kCostModelNames[] = {{CostModel::kPaper, "paper"},
                                                   {CostModel::kOverlap, "overlap"}};

std::string_view cost_model_name(CostModel m) {
  return enum_name(kCostModelNames, m);
}

CostModel parse_cost_model(std::string_view name) {
  return parse_enum(kCostModelNames, name, "--cost-model");
}

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
  // What a token reads of a layer in RAM: a mixture reads only its routed experts.
  const double b_read_kv = mp.layer_read_bytes() + kv;
  const double lookup = head ? static_cast<double>(mp.input_bytes) / mp.vocab : 0.0;  // b_i / V
  const double io = head ? lookup + static_cast<double>(mp.output_bytes) : 0.0;
  // The overlap model plans for the streaming stage, which reserves its own working buffers.
  const double c_cpu = static_cast<double>(
      p.options.model == CostModel::kOverlap && mp.stage_buffer_cpu > 0 ? mp.stage_buffer_cpu
                                                                        : mp.compute_buffer_cpu);
  const double c_gpu = static_cast<double>(mp.compute_buffer_gpu);
  const double l_cpu = l - l_gpu;
  const bool metal = d.gpu.kind == GpuKind::kMetal;
  const double s_disk = disk_read_bps(d);

  DeviceTerms t;
  // Eq. 12: layers on each backend, plus the output layer on the head's CPU.
  const auto f = layer_flops(mp, p.options.ctx);
  const double cpu_flop_s = flop_time(f, d.cpu.flops);  // one CPU layer's arithmetic
  const double gpu_flop_s = l_gpu != 0 && d.has_gpu() ? l_gpu * flop_time(f, d.gpu.flops) : 0.0;
  const double out_flop_s = head ? flop_time(mp.output_flops, d.cpu.flops) : 0.0;
  t.compute_s = l_cpu * cpu_flop_s;
  t.compute_s += gpu_flop_s;
  if (head) t.compute_s += out_flop_s;

  // Eq. 13-14: KV append, host<->device copies per window, streaming weights + KV.
  t.memory_s = l_cpu * d.cpu.kv_copy_s + l_cpu * b_read_kv / d.cpu.mem_read_bps;
  if (d.has_gpu()) {
    if (l_gpu != 0) t.memory_s += l_gpu * d.gpu.kv_copy_s + l_gpu * b_read_kv / d.gpu.mem_read_bps;
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
  // Eq. 19: one hidden state per window. Each device receives as many hops as it sends, so
  // the hops are costed with the link into this device (profile::LinkProfile).
  t.comm_s = hops * link_latency_s(d, mp.hidden_bytes);
  return t;
}

OverlapTerms overlap_terms(const Problem& p, size_t m, double l, double l_gpu, double windows,
                           double hops) {
  const DeviceProfile& d = p.devices[m];
  const auto& mp = p.model;
  OverlapTerms o;
  o.paper = device_terms(p, m, l, l_gpu, windows, hops, MemCase::kAuto);
  const DeviceTerms& t = o.paper;
  // Arithmetic and reads from RAM add up, as in the paper: at the thread counts the devices
  // run, a decode layer's matvec does not hide its reads under its arithmetic
  // (docs/plan.md, "The overlap model").
  o.busy_s = t.compute_s + t.memory_s;
  const bool head = m == 0;
  const double io =
      head ? static_cast<double>(mp.input_bytes) / mp.vocab + static_cast<double>(mp.output_bytes)
           : 0.0;
  if (d.gpu.kind == GpuKind::kMetal) {
    // The paper's all-or-nothing rule: over the working set, Metal drops and reloads every
    // weight each token, and nothing hides it.
    o.assigned_bytes = l * mp.layer_bytes + io;
    o.cap_bytes = t.ram_cap - t.pinned_need;
    o.disk_bps = disk_read_bps(d);
    o.mode = t.overloaded ? ReadMode::kMetalReload : ReadMode::kFits;
    o.fixed_exposed_s = t.disk_s;
    o.fixed_read_bytes = t.disk_s * o.disk_bps;
    return o;
  }
  o.assigned_bytes = (l - l_gpu) * mp.layer_bytes + io;  // KV is pinned, not streamed
  o.cap_bytes = t.ram_cap - t.pinned_need;
  // The devices read matrices larger than a slice in row slices (residency/stream_plan.h),
  // so the largest unit is at most a slice of the device's memory.
  const uint64_t total = d.ram_total_bytes != 0 ? d.ram_total_bytes : d.ram_available_bytes;
  const double target = p.options.pressure_target;
  const uint64_t unit =
      std::min(mp.stream_unit_bytes, residency::stream_slice_bytes(total, target));
  o.buffer_min_bytes = 2.0 * static_cast<double>(unit);
  // What the run takes anyway, within the target's share: working buffers, the KV cache of
  // its CPU layers at the planned context.
  const uint64_t working = mp.stage_buffer_cpu != 0 ? mp.stage_buffer_cpu : mp.compute_buffer_cpu;
  const double kv = (l - l_gpu) * static_cast<double>(mp.kv_bytes_per_token) * p.options.ctx;
  o.buffer_share_bytes =
      residency::stream_buffer_share(total, static_cast<double>(working) + kv, target);
  o.buffer_max_bytes = std::max(o.buffer_min_bytes, std::floor(o.buffer_share_bytes));
  // A mixture's experts leave memory before any dense weight (a dense weight is read every
  // token, an expert by the share of tokens routed to it): the bytes over memory are experts
  // first, of which a token reads its share, on demand, where the router picks them (nothing
  // hides those reads). What is over memory beyond the experts streams as a dense model's.
  const double experts = (l - l_gpu) * mp.expert_bytes;
  o.expert_out_bytes = std::clamp(o.assigned_bytes - o.cap_bytes, 0.0, experts);
  const double expert_reads = mp.expert_share * o.expert_out_bytes;
  if (o.excess_bytes() <= 0) {
    o.mode = ReadMode::kFits;
    o.disk_bps = d.disk_seq_read_bps;
  } else if (p.options.streaming) {
    o.mode = ReadMode::kStreams;
    o.disk_bps = d.disk_seq_read_bps;  // direct I/O reads large sequential extents on every OS
    o.disk_burst_bytes = d.disk_burst_bytes;
    o.disk_peak_bps = d.disk_peak_read_bps;
  } else {
    // Plain mmap: the page faults come at the OS's paging speed, inside compute: every dense
    // weight, and the experts the tokens are routed to.
    o.mode = ReadMode::kThrashes;
    o.disk_bps = disk_read_bps(d);
    o.fixed_read_bytes = o.assigned_bytes - experts + expert_reads;
    o.fixed_exposed_s = o.fixed_read_bytes / o.disk_bps;
    return o;
  }
  o.expert_read_bytes = expert_reads;
  o.fixed_read_bytes += expert_reads;
  o.fixed_exposed_s += expert_reads / d.disk_seq_read_bps;
  return o;
}

namespace {

// Why the device cannot run with these terms, or "".
std::string violation(const DeviceProfile& d, double l_gpu, const DeviceTerms& t,
                      const OverlapTerms* o) {
  if (t.vram_need > t.vram_cap) {
    return std::to_string(static_cast<uint64_t>(l_gpu)) + " GPU layers need " +
           fmt_gib(t.vram_need) + " of VRAM, " + fmt_gib(t.vram_cap) + " available";
  }
  if (t.pinned_need > t.pinned_cap) {
    return "KV cache and buffers need " + fmt_gib(t.pinned_need) + ", only " +
           fmt_gib(t.pinned_cap) + " available";
  }
  if (!o || o->mode == ReadMode::kMetalReload || d.gpu.kind == GpuKind::kMetal) {
    if (t.overloaded && t.slow_disk) {
      return "weights overflow RAM by " + fmt_gib(t.ram_need - t.ram_cap) +
             " and its disk is too slow to reload them";
    }
    return "";
  }
  if (o->expert_out_bytes > 0 && t.slow_disk) {
    return "experts overflow memory by " + fmt_gib(o->expert_out_bytes) +
           " and its disk is too slow to read them when the router picks them";
  }
  if (o->mode != ReadMode::kFits && t.slow_disk) {
    return "weights overflow memory by " + fmt_gib(o->excess_bytes()) +
           " and its disk is too slow to " + (o->mode == ReadMode::kStreams ? "stream" : "reload") +
           " them";
  }
  if (o->mode == ReadMode::kStreams && o->cap_bytes < o->buffer_min_bytes) {
    return "streaming needs a buffer of " + fmt_gib(o->buffer_min_bytes) + ", only " +
           fmt_gib(std::max(0.0, o->cap_bytes)) + " left after the KV cache and buffers";
  }
  return "";
}

// One device of the overlap ring LP.
struct RingDevice {
  size_t m = 0;
  double fixed_s = 0;  // busy + comm + fixed exposed reads
  bool streams = false;
  double comm_s = 0, busy_s = 0;
  double excess = 0, cap = 0, buffer_min = 0, s = 1;  // E, cap, C_min (capped at cap), s
  double buffer_max = 0;                              // C's upper bound: min(cap, C_max)
  double burst = 0;                                   // B: the disk's burst after a gap
  double peak = 0;                                    // u: the rate of the burst (0: at once)
};

struct RingSolution {
  double t = 0;
  std::vector<double> buffer, exposed;  // (devices of the ring) C, e
};

}  // namespace

StreamAt stream_at(double excess, double busy_s, double comm_s, double buffer_min,
                   double buffer_max, const DiskRates& disk, uint32_t k, double t) {
  const double s = disk.seq_bps, b = disk.burst_bytes, u = disk.peak_bps;
  // k = 1: the buffer is neutral, so the smallest. k >= 2: the largest that helps (beyond
  // (E - k B) / (k - 1) the gaps hide every byte the rate bound counts, beyond E / (k - 1)
  // every byte the peak bound counts).
  const double km1 = static_cast<double>(k) - 1.0;
  double c = buffer_min;
  if (k >= 2) {
    const double enough = (u > 0 ? excess : excess - k * b) / km1;
    c = std::max(buffer_min, std::min({buffer_max, enough, s * (t - comm_s) - excess}));
  }
  const double read = excess + c;
  const double hidden = std::min(read, k * (c + b));
  double exposed = (read - hidden) / s - busy_s;
  // What is not in the buffer when a round's compute starts comes at the peak rate at best.
  if (u > 0) exposed = std::max(exposed, (read - k * c) / u - busy_s);
  return {c, std::max(0.0, exposed)};
}

namespace {

// The overlap model's LP for fixed (w, n): minimise t subject to, for each streaming device,
//   e >= 0,  e >= (X - H) / s - T,  e >= (X - k C) / u - T,  X = E + C,  H <= k (C + B),
//   H <= X,  H / s <= t - T - e - comm,  X / s <= t,  C_min <= C <= min(cap, C_max)
// (H: bytes hidden in gaps; B: what the disk serves beyond its rate s right after a gap, as a
// throttle's time slice or a drive's burst buffer allows, at its peak rate u; a constant-rate
// disk has B = 0) and t >= sum over devices of (T + e + comm). For a given t each device's
// least e is stream_at's: the largest buffer whose read D = X / s still fits in t - comm hides
// the most (reading happens in the idle gaps, during the device's own compute, or exposed;
// never while it sends). e(t) is convex, piecewise linear and non-increasing, so t - sum(...)
// is increasing and the optimum is its root, or the lower bound t >= comm + (E + C_min) / s of
// the slowest reader when that is larger (then the slack is that reader's exposed time). The
// root lies in [F(t0), ...]: with t0 the sum of the fixed terms, t0 <= root <= F(t0); bisection
// to the last bit of a double.
RingSolution solve_ring(const std::vector<RingDevice>& devs, uint32_t k) {
  double fixed = 0;  // sum of fixed terms
  double t_lo = 0;
  size_t binding = devs.size();
  for (size_t i = 0; i < devs.size(); ++i) {
    const auto& d = devs[i];
    fixed += d.fixed_s;
    if (!d.streams) continue;
    const double lo = d.comm_s + (d.excess + d.buffer_min) / d.s;
    if (lo > t_lo) {
      t_lo = lo;
      binding = i;
    }
  }
  auto at = [&](const RingDevice& d, double t) {
    return stream_at(d.excess, d.busy_s, d.comm_s, d.buffer_min, d.buffer_max,
                     {d.s, d.burst, d.peak}, k, t);
  };
  auto sum_at = [&](double t) {  // F(t): the ring's time when the token takes t
    double sum = fixed;
    for (const auto& d : devs)
      if (d.streams) sum += at(d, t).exposed_s;
    return sum;
  };
  double lo = fixed, hi = sum_at(fixed);
  while (hi > lo) {
    const double mid = lo + (hi - lo) / 2;
    if (mid <= lo || mid >= hi) break;
    if (mid >= sum_at(mid))
      hi = mid;
    else
      lo = mid;
  }
  RingSolution out;
  out.t = std::max(hi, t_lo);
  out.buffer.assign(devs.size(), 0.0);
  out.exposed.assign(devs.size(), 0.0);
  double sum = 0;
  for (size_t i = 0; i < devs.size(); ++i) {
    const auto& d = devs[i];
    sum += d.fixed_s;
    if (!d.streams) continue;
    const auto a = at(d, out.t);
    out.buffer[i] = a.buffer;
    out.exposed[i] = a.exposed_s;
    sum += out.exposed[i];
  }
  // When the slowest reader's bound sets t, its reads take the slack: they are exposed.
  if (binding < devs.size() && out.t > sum) out.exposed[binding] += out.t - sum;
  return out;
}

}  // namespace

std::string device_violation(const Problem& p, size_t m, double l, double l_gpu, double windows,
                             double hops) {
  if (p.options.model == CostModel::kPaper) {
    const auto t = device_terms(p, m, l, l_gpu, windows, hops, MemCase::kAuto);
    return violation(p.devices[m], l_gpu, t, nullptr);
  }
  const auto o = overlap_terms(p, m, l, l_gpu, windows, hops);
  return violation(p.devices[m], l_gpu, o.paper, &o);
}

Prediction predict(const Problem& p, const std::vector<uint32_t>& w, const std::vector<uint32_t>& n,
                   const std::vector<bool>& relay_in) {
  const size_t M = p.devices.size();
  if (w.size() != M || n.size() != M)
    throw UsageError("plan has a different number of devices than the ring");
  const bool overlap = p.options.model == CostModel::kOverlap;
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
  // Under the overlap model a head without layers still embeds the token, computes the
  // output layer and forwards the hidden state once per round.
  const bool head_only = overlap && w[0] == 0;
  if (head_only) ++members;
  size_t workers_with_layers = 0;
  for (size_t m = 1; m < M; ++m) workers_with_layers += w[m] > 0 ? 1 : 0;
  if (w[0] == 0 && !overlap) {
    out.feasible = false;
    out.reason = "the head '" + p.devices[0].name + "' must run at least one layer window";
  }
  out.W = W;
  out.k = (L + W - 1) / W;
  // A head without layers ahead of two or more workers sees each token once: the last worker
  // sends every other round straight to the first (cluster::RingSource), so the head makes one
  // hop per token instead of one per round.
  const bool head_wraps = head_only && workers_with_layers >= 2 && out.k > 1;
  const uint32_t full = L / W;  // rounds in which every window is filled
  uint32_t rest = L % W;        // layers of the last, partial round, filled in ring order
  auto infeasible = [&](const std::string& name, const std::string& why) {
    if (out.feasible) {
      out.feasible = false;
      out.reason = "device '" + name + "': " + why;
    }
  };
  std::vector<RingDevice> ring;  // overlap: every member, for the ring's LP
  for (size_t m = 0; m < M; ++m) {
    DeviceCost dc;
    dc.w = w[m];
    dc.n = n[m];
    dc.relay = relay[m] && w[m] == 0 && !(head_only && m == 0);
    const uint32_t extra = std::min(w[m], rest);
    const uint32_t extra_gpu = std::min(n[m], extra);
    rest -= extra;
    dc.layers = full * w[m] + extra;
    dc.gpu_layers = full * n[m] + extra_gpu;
    dc.windows = w[m] == 0 ? 0 : full + (extra > 0 ? 1 : 0);
    const bool computes = w[m] > 0 || (head_only && m == 0);
    if (!computes && !dc.relay) {
      out.devices.push_back(dc);
      continue;
    }
    // A relay forwards the hidden state once per round; a lone device talks to nobody.
    const double hops = members <= 1             ? 0.0
                        : (m == 0 && head_wraps) ? 1.0
                        : w[m] == 0              ? static_cast<double>(out.k)
                                                 : dc.windows;
    if (dc.relay) {
      dc.comm_s = hops * link_latency_s(p.devices[m], p.model.hidden_bytes);
      if (overlap) ring.push_back({m, dc.comm_s, false, dc.comm_s});
      out.devices.push_back(dc);
      continue;
    }
    const auto& d = p.devices[m];
    if (!overlap) {
      const auto t = device_terms(p, m, dc.layers, dc.gpu_layers, dc.windows, hops, MemCase::kAuto);
      if (auto why = violation(d, dc.gpu_layers, t, nullptr); !why.empty()) infeasible(d.name, why);
      dc.overloaded = t.overloaded;
      dc.ram_need_bytes = t.ram_need;
      dc.ram_cap_bytes = t.ram_cap;
      dc.compute_s = t.compute_s;
      dc.memory_s = t.memory_s;
      dc.disk_s = dc.exposed_s = t.disk_s;
      dc.comm_s = t.comm_s;
      dc.assigned_bytes = t.ram_need - t.pinned_need;
      dc.weight_budget_bytes = t.ram_cap - t.pinned_need;
      dc.stream_bytes = t.disk_s * disk_read_bps(d);
      out.devices.push_back(dc);
      continue;
    }
    const auto o = overlap_terms(p, m, dc.layers, dc.gpu_layers, dc.windows, hops);
    if (auto why = violation(d, dc.gpu_layers, o.paper, &o); !why.empty()) infeasible(d.name, why);
    dc.overloaded = o.mode != ReadMode::kFits || o.expert_out_bytes > 0;
    dc.ram_need_bytes = o.paper.ram_need;
    dc.ram_cap_bytes = o.paper.ram_cap;
    dc.compute_s = o.paper.compute_s;
    dc.memory_s = o.paper.memory_s;
    dc.comm_s = o.paper.comm_s;
    dc.assigned_bytes = o.assigned_bytes;
    dc.weight_budget_bytes = o.cap_bytes;
    dc.stream_bytes = o.fixed_read_bytes;
    dc.expert_read_bytes = o.expert_read_bytes;
    dc.disk_s = dc.exposed_s = o.fixed_exposed_s;
    RingDevice rd{m, o.busy_s + o.paper.comm_s + o.fixed_exposed_s, o.mode == ReadMode::kStreams,
                  o.paper.comm_s, o.busy_s};
    if (rd.streams) {
      rd.excess = o.excess_bytes();
      rd.cap = o.cap_bytes;
      rd.buffer_min = std::min(o.buffer_min_bytes, std::max(0.0, o.cap_bytes));
      rd.buffer_max = std::max(rd.buffer_min, std::min(o.cap_bytes, o.buffer_max_bytes));
      rd.s = o.disk_bps;
      rd.burst = o.disk_burst_bytes;
      rd.peak = o.disk_peak_bps;
    }
    ring.push_back(rd);
    out.devices.push_back(dc);
  }
  if (overlap) {
    const auto sol = solve_ring(ring, out.k);
    for (size_t i = 0; i < ring.size(); ++i) {
      if (!ring[i].streams) continue;
      auto& dc = out.devices[ring[i].m];
      dc.stream_buffer_bytes = sol.buffer[i];
      dc.weight_budget_bytes = ring[i].cap - sol.buffer[i];
      dc.stream_bytes = ring[i].excess + sol.buffer[i];
      dc.disk_s = dc.stream_bytes / ring[i].s;
      dc.exposed_s = sol.exposed[i];
      // A mixture's experts read on demand besides the stream (in the ring's fixed terms).
      dc.stream_bytes += dc.expert_read_bytes;
      dc.disk_s += dc.expert_read_bytes / ring[i].s;
      dc.exposed_s += dc.expert_read_bytes / ring[i].s;
    }
  }
  double total = 0;
  for (const auto& dc : out.devices) total += dc.total_s();
  out.tpot_s = total;
  return out;
}

}  // namespace hearth::plan
