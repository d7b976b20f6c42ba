#include "hearth/plan/knapsack_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "hearth/plan/limits.h"

namespace hearth::plan {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
// A descent step must gain at least this share of the TPOT; below it the plan is the optimum
// (the tests compare with exhaustive search at 1e-9).
constexpr double kStep = 1e-11;
constexpr int kMaxDescents = 200;

// a*w + b*n + c.
struct Lin {
  double w = 0, n = 0, c = 0;
  double at(double x, double y) const { return c + w * x + n * y; }
};

Lin lin3(double f00, double f10, double f11) {
  return {f10 - f00, f11 - f10, f00};
}

// One device's terms at fixed k, linear in its window w and GPU layers n: three evaluations of
// the cost model give them exactly (the model is linear in both once k, the windows, the hops
// and the memory case are fixed), as for Halda's ILPs.
struct Load {
  bool paper = false;  // the paper's terms: the paper model, or a Metal device in either
  bool slow = false;
  uint32_t n_cap = 0;  // GPU layers per window that fit VRAM
  Lin pinned;
  double pinned_cap = 0;
  // Not Metal: the overlap terms.
  Lin busy, assigned, cap, share;
  Lin experts;              // a mixture's expert bytes on the CPU (0: dense)
  double expert_share = 1;  // the share of them a token reads
  double comm = 0, c_min = 0, s_mmap = 0;
  DiskRates disk;
  // The paper's terms: within memory, or over it (reloads per token: the part over memory on
  // M1/M3, every weight on Metal).
  Lin fits, over, ram;
  double ram_cap = 0;
};

Load make_load(const Problem& p, size_t m, uint32_t k, double windows, double hops) {
  const auto& d = p.devices[m];
  const bool gpu = d.has_gpu();
  Load l;
  l.n_cap = gpu ? gpu_window_cap(p, m, k) : 0;
  if (p.options.model == CostModel::kPaper || d.gpu.kind == profile::GpuKind::kMetal) {
    l.paper = true;
    auto terms = [&](double w, double n, MemCase mc) {
      return device_terms(p, m, k * w, k * n, windows, hops, mc);
    };
    const auto f00 = terms(0, 0, MemCase::kFits), f10 = terms(1, 0, MemCase::kFits),
               f11 = gpu ? terms(1, 1, MemCase::kFits) : f10;
    const auto v00 = terms(0, 0, MemCase::kOverloaded), v10 = terms(1, 0, MemCase::kOverloaded),
               v11 = gpu ? terms(1, 1, MemCase::kOverloaded) : v10;
    l.fits = lin3(f00.total_s(), f10.total_s(), f11.total_s());
    l.over = lin3(v00.total_s(), v10.total_s(), v11.total_s());
    l.ram = lin3(f00.ram_need, f10.ram_need, f11.ram_need);
    l.ram_cap = f00.ram_cap;
    l.pinned = lin3(f00.pinned_need, f10.pinned_need, f11.pinned_need);
    l.pinned_cap = f00.pinned_cap;
    l.slow = f00.slow_disk;
    return l;
  }
  auto at = [&](double w, double n) { return overlap_terms(p, m, k * w, k * n, windows, hops); };
  const auto o00 = at(0, 0), o10 = at(1, 0), o11 = gpu ? at(1, 1) : o10;
  l.pinned = lin3(o00.paper.pinned_need, o10.paper.pinned_need, o11.paper.pinned_need);
  l.pinned_cap = o00.paper.pinned_cap;
  l.slow = o00.paper.slow_disk;
  l.busy = lin3(o00.busy_s, o10.busy_s, o11.busy_s);
  l.assigned = lin3(o00.assigned_bytes, o10.assigned_bytes, o11.assigned_bytes);
  l.cap = lin3(o00.cap_bytes, o10.cap_bytes, o11.cap_bytes);
  l.share = lin3(o00.buffer_share_bytes, o10.buffer_share_bytes, o11.buffer_share_bytes);
  // Expert bytes per CPU layer: (w, n) = (1, 0) holds k layers, (1, 1) k - k GPU layers.
  const double x = k * p.model.expert_bytes;
  l.experts = {x, -x, 0.0};
  l.expert_share = p.model.expert_share;
  l.comm = o00.paper.comm_s;
  l.c_min = o00.buffer_min_bytes;
  l.disk = {d.disk_seq_read_bps, d.disk_burst_bytes, d.disk_peak_read_bps};
  l.s_mmap = disk_read_bps(d);
  return l;
}

// The device's share of a token of TPOT tau with window w and n GPU layers. Overlap model: its
// busy time, its hops and the read time that its read-ahead cannot hide in tau (cost_model.cpp,
// solve_ring: the largest buffer whose read still fits in tau - comm hides the most). The
// paper's terms do not depend on tau. kNever when the load breaks a limit or cannot be read
// within tau.
double cost(const Load& l, const Problem& p, uint32_t k, double w, double n, double tau) {
  if (l.pinned.at(w, n) > l.pinned_cap) return kNever;
  if (l.paper) {
    if (l.ram.at(w, n) <= l.ram_cap) return l.fits.at(w, n);
    return l.slow ? kNever : l.over.at(w, n);
  }
  const double busy = l.busy.at(w, n);
  const double base = busy + l.comm;
  const double assigned = l.assigned.at(w, n);
  const double cap = l.cap.at(w, n);
  const double over = assigned - cap;
  if (over <= 0) return base;
  if (l.slow) return kNever;
  // overlap_terms: experts leave memory first and a token reads its share of them, exposed;
  // the rest over memory is dense and streams (or faults in, without streaming).
  const double experts = l.experts.at(w, n);
  const double expert_out = std::min(over, experts);
  const double excess = over - expert_out;
  if (!p.options.streaming && excess > 0) {
    return base + (assigned - experts + l.expert_share * expert_out) / l.s_mmap;
  }
  const double moe = l.expert_share * expert_out / l.disk.seq_bps;
  if (excess <= 0) return base + moe;
  if (cap < l.c_min) return kNever;  // no room for the smallest buffer
  // The slowest reader bound: the excess and the smallest buffer must be read within tau.
  const double room = l.disk.seq_bps * (tau - l.comm) - excess;
  if (room < l.c_min) return kNever;
  const double c_max = std::min(cap, std::max(l.c_min, l.share.at(w, n)));
  return base + moe + stream_at(excess, busy, l.comm, l.c_min, c_max, l.disk, k, tau).exposed_s;
}

// The best cost of a device for each window w = 0..W at tau (over its GPU layers n), and the
// n that gives it.
void device_table(const Load& l, const Problem& p, uint32_t k, uint32_t W, double tau,
                  std::vector<double>& best, std::vector<uint32_t>& best_n) {
  best.assign(W + 1, kNever);
  best_n.assign(W + 1, 0);
  for (uint32_t w = 1; w <= W; ++w) {
    const uint32_t n_max = std::min(w, l.n_cap);
    for (uint32_t n = 0; n <= n_max; ++n) {
      const double c = cost(l, p, k, w, n, tau);
      if (c < best[w]) {
        best[w] = c;
        best_n[w] = n;
      }
    }
  }
}

// The search at one k: the workers' loads, the head's with layers, and the head's without
// layers hopping once per round or (ahead of two or more workers) once per token.
class RoundSearch {
 public:
  RoundSearch(const Problem& p, uint32_t k) : p_(p), k_(k), W_(p.model.n_layers / k) {
    const size_t N = p.devices.size();
    const double kd = k;
    for (size_t m = 0; m < N; ++m) loads_.push_back(make_load(p, m, k, kd, kd));
    head_bare_ = make_load(p, 0, k, 0, kd);
    head_wrap_ = make_load(p, 0, k, 0, 1);
  }

  // The cheapest assignment at tau when it costs <= tau (a plan of TPOT <= tau exists).
  std::optional<Assignment> below(double tau) {
    const size_t N = p_.devices.size();
    const uint32_t W = W_;
    // classes of the workers taken so far: 0, 1, 2 or more (the head wraps only ahead of two).
    constexpr int kClasses = 3;
    auto at = [&](uint32_t j, int c) { return static_cast<size_t>(j) * kClasses + c; };
    std::vector<double> cur((W + 1) * kClasses, kNever), next;
    cur[at(0, 0)] = 0;
    choice_.assign(N, {});
    n_of_.assign(N, {});
    std::vector<double> f;
    for (size_t m = 1; m < N; ++m) {
      device_table(loads_[m], p_, k_, W, tau, f, n_of_[m]);
      next = cur;  // w = 0: not in the ring
      auto& ch = choice_[m];
      ch.assign((W + 1) * kClasses, Step{});
      for (uint32_t j = 0; j < W; ++j) {
        for (int c = 0; c < kClasses; ++c) {
          const double base = cur[at(j, c)];
          if (base > tau) continue;  // costs only grow from here
          const int c2 = std::min(c + 1, kClasses - 1);
          for (uint32_t w = 1; j + w <= W; ++w) {
            const double v = base + f[w];
            if (v < next[at(j + w, c2)]) {
              next[at(j + w, c2)] = v;
              ch[at(j + w, c2)] = {static_cast<uint16_t>(w), static_cast<uint8_t>(c)};
            }
          }
        }
      }
      cur.swap(next);
    }
    // The head: w = 0 (bare, or wrapping ahead of two or more workers) or w >= 1.
    std::vector<uint32_t> head_n;
    device_table(loads_[0], p_, k_, W, tau, f, head_n);
    // The paper's model has no head without layers (predict() calls that plan infeasible).
    const bool overlap = p_.options.model == CostModel::kOverlap;
    const double bare = overlap ? cost(head_bare_, p_, k_, 0, 0, tau) : kNever;
    const double wrap = overlap && k_ > 1 ? cost(head_wrap_, p_, k_, 0, 0, tau) : kNever;
    double best = kNever;
    uint32_t best_wh = 0;
    int best_c = 0;
    for (uint32_t wh = 0; wh < W; ++wh) {
      for (int c = 1; c < kClasses; ++c) {
        const double h = wh > 0 ? f[wh] : (c == 2 ? std::min(bare, wrap) : bare);
        const double v = cur[at(W - wh, c)] + h;
        if (v < best) {
          best = v;
          best_wh = wh;
          best_c = c;
        }
      }
    }
    if (!(best <= tau)) return std::nullopt;
    Assignment a;
    a.w.assign(N, 0);
    a.n.assign(N, 0);
    a.relay.assign(N, false);
    a.w[0] = best_wh;
    a.n[0] = best_wh > 0 ? head_n[best_wh] : 0;
    // Walk the choices back from the last worker.
    uint32_t j = W - best_wh;
    int c = best_c;
    for (size_t m = N - 1; m >= 1 && j > 0; --m) {
      const uint16_t w = choice_[m][at(j, c)].w;
      if (w == 0) continue;  // this device stayed out on the best path
      a.w[m] = w;
      a.n[m] = n_of_[m][w];
      j -= w;
      c = choice_[m][at(j + w, c)].from;
    }
    return a;
  }

 private:
  const Problem& p_;
  uint32_t k_, W_;
  std::vector<Load> loads_;
  Load head_bare_, head_wrap_;
  // Per worker and state (layers, class): the window it took to reach the state (0: it stayed
  // out, the state is the previous worker's) and the class it came from.
  struct Step {
    uint16_t w = 0;
    uint8_t from = 0;
  };
  std::vector<std::vector<Step>> choice_;
  std::vector<std::vector<uint32_t>> n_of_;
};

}  // namespace

std::optional<SearchResult> knapsack_search(const Problem& p, uint32_t rounds) {
  const size_t N = p.devices.size();
  const uint32_t L = p.model.n_layers;
  std::optional<SearchResult> best;
  auto offer = [&](const Assignment& a) -> double {
    const auto pred = predict(p, a.w, a.n);
    if (!pred.feasible) return kNever;
    if (!best || pred.tpot_s < best->tpot_s) best = SearchResult{a, pred.tpot_s, 0};
    return pred.tpot_s;
  };
  auto ks = valid_rounds(L, 1);
  if (rounds != 0) std::erase_if(ks, [&](uint32_t k) { return k != rounds; });
  // The head alone: every k, every n.
  for (uint32_t k : ks) {
    const uint32_t W = L / k;
    const uint32_t n_max = p.devices[0].has_gpu() ? std::min(W, gpu_window_cap(p, 0, k)) : 0;
    for (uint32_t n = 0; n <= n_max; ++n) {
      Assignment a{std::vector<uint32_t>(N, 0), std::vector<uint32_t>(N, 0),
                   std::vector<bool>(N, false)};
      a.w[0] = W;
      a.n[0] = n;
      offer(a);
    }
  }
  if (N < 2) return best;
  uint32_t knapsacks = 0;
  for (uint32_t k : ks) {
    RoundSearch search(p, k);
    // A first plan at this k: below the incumbent, or below anything.
    double tau = best ? best->tpot_s * (1 - kStep) : 1e12;
    for (int i = 0; i < kMaxDescents; ++i) {
      ++knapsacks;
      const auto a = search.below(tau);
      if (!a) break;
      const double t = offer(*a);
      if (!(t < tau)) break;  // the plan costs what the knapsack said: no lower one exists
      tau = t * (1 - kStep);
    }
  }
  if (best) best->knapsacks = knapsacks;
  return best;
}

}  // namespace hearth::plan
