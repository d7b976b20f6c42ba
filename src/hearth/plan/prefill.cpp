#include "hearth/plan/prefill.h"

#include <algorithm>

namespace hearth::plan {

double PrefillDevice::chunk_s(int64_t c) const {
  const auto n = static_cast<double>(c);
  return std::max(read_s, n * compute_s_per_token) + disk_s + hop_latency_s + n * hop_s_per_token;
}

double PrefillModel::ttft_s(int64_t n, int64_t chunk, bool pipelined) const {
  if (n <= 0 || devices.empty()) return 0;
  chunk = std::clamp<int64_t>(chunk, 1, n);
  double t = 0;
  for (const auto& d : devices) t += d.chunk_s(chunk);  // the first chunk crosses every device
  for (int64_t done = chunk; done < n; done += chunk) {
    const int64_t c = std::min(chunk, n - done);
    double slowest = 0, all = 0;
    for (const auto& d : devices) {
      slowest = std::max(slowest, d.chunk_s(c));
      all += d.chunk_s(c);
    }
    t += pipelined ? slowest : all;
  }
  return t;
}

int64_t PrefillModel::best_chunk(int64_t n) const {
  int64_t best = n;
  double best_t = ttft_s(n, n);
  for (int64_t c = 16; c < n; c *= 2) {
    const double t = ttft_s(n, c);
    if (t < best_t) {
      best = c;
      best_t = t;
    }
  }
  return best;
}

PrefillModel prefill_model(const Problem& p, const Prediction& pred) {
  PrefillModel out;
  const auto& mp = p.model;
  for (size_t m = 0; m < pred.devices.size() && m < p.devices.size(); ++m) {
    const DeviceCost& dc = pred.devices[m];
    const profile::DeviceProfile& d = p.devices[m];
    if (dc.layers == 0 && !dc.relay && m != 0) continue;
    PrefillDevice pd;
    // Arithmetic at the matmul rate where the profile has one (the matvec rate otherwise).
    const auto& rates = d.cpu.matmul_flops.empty() ? d.cpu.flops : d.cpu.matmul_flops;
    double layer_s = 0;
    for (const auto& [type, f] : mp.mean_layer.flops) {
      const auto it = rates.find(type);
      const auto fallback = d.cpu.flops.find(type);
      const double rate = it != rates.end() && it->second > 0 ? it->second
                          : fallback != d.cpu.flops.end()     ? fallback->second
                                                              : 0;
      if (f > 0 && rate > 0) layer_s += f / rate;
    }
    pd.compute_s_per_token = layer_s * dc.layers;
    pd.read_s = d.cpu.mem_read_bps > 0 ? mp.layer_bytes * dc.layers / d.cpu.mem_read_bps : 0;
    pd.disk_s = dc.disk_s;
    pd.decode_compute_s = dc.compute_s;
    if (dc.windows > 0 || dc.relay) {
      const double hops = std::max<double>(1, dc.windows);
      pd.hop_latency_s = hops * link_latency_s(d, 0);
      pd.hop_s_per_token = d.link.bandwidth_bps > 0
                               ? hops * static_cast<double>(mp.hidden_bytes) / d.link.bandwidth_bps
                               : 0;
    }
    out.devices.push_back(pd);
  }
  return out;
}

double verify_trip_s(const Prediction& pred, const PrefillModel& m, int64_t rows) {
  double t = pred.tpot_s;
  const auto extra = static_cast<double>(std::max<int64_t>(rows, 1) - 1);
  for (const auto& d : m.devices) {
    t += std::max(0.0, static_cast<double>(rows) * d.compute_s_per_token - d.decode_compute_s);
    t += extra * d.hop_s_per_token;
  }
  return t;
}

double expected_tokens_per_trip(double acceptance, int64_t drafts) {
  const double a = std::clamp(acceptance, 0.0, 1.0);
  double sum = 1, term = 1;
  for (int64_t i = 0; i < drafts; ++i) {
    term *= a;
    sum += term;
  }
  return sum;
}

}  // namespace hearth::plan
