#include "hearth/plan/baselines.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/plan/halda.h"
#include "hearth/plan/limits.h"

namespace hearth::plan {

namespace {

// Keeps the best of the per-k candidates: feasible beats infeasible, then lower TPOT.
struct Best {
  std::optional<Assignment> a;
  bool feasible = false;
  double tpot = std::numeric_limits<double>::infinity();

  void offer(const Problem& p, const Assignment& cand) {
    const auto pred = predict(p, cand.w, cand.n, cand.relay);
    if ((pred.feasible && !feasible) || (pred.feasible == feasible && pred.tpot_s < tpot)) {
      a = cand;
      feasible = pred.feasible;
      tpot = pred.tpot_s;
    }
  }
};

Plan finish(const Problem& p, const Best& best, const char* name, double t0) {
  Plan plan = best.a ? make_plan(p, *best.a, name)
                     : no_plan(p, name, "fewer layers than devices: every device needs a layer");
  plan.solve_ms = now_ms() - t0;
  return plan;
}

Assignment with_gpu_layers(const Problem& p, std::vector<uint32_t> w, uint32_t k) {
  Assignment a;
  a.n.resize(w.size());
  for (size_t m = 0; m < w.size(); ++m) a.n[m] = std::min(w[m], gpu_window_cap(p, m, k));
  a.w = std::move(w);
  a.relay.assign(a.w.size(), false);
  return a;
}

// Splits `extra` proportionally to `weights`, shares may be zero (largest remainder).
std::vector<uint32_t> spread(const std::vector<double>& weights, uint32_t extra) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<uint32_t> out(weights.size(), 0);
  std::vector<double> frac(weights.size());
  uint32_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double s = extra * weights[i] / sum;
    out[i] = static_cast<uint32_t>(std::floor(s));
    frac[i] = s - out[i];
    given += out[i];
  }
  std::vector<size_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  for (size_t i = 0; given < extra; i = (i + 1) % order.size(), ++given) ++out[order[i]];
  return out;
}

// Exhaustive search under the overlap model. Its objective is not separable (how much of a
// device's read hides depends on the ring's TPOT), so every (w, n) is costed by predict()
// itself. Pruned by per-device limits (device_violation) and by the sum of busy times (compute
// and memory, overlapped per layer), a lower bound on TPOT (exposed reads and hops only add).
void exhaustive_overlap(const Problem& p, const ExhaustiveOptions& options, uint32_t k,
                        Assignment& best_a, double& best_t) {
  const size_t M = p.devices.size();
  const uint32_t W = p.model.n_layers / k;
  struct Option {
    uint32_t n;
    double busy_s;
  };
  // options_of[m][w]: the feasible GPU splits of w layers per window on device m.
  std::vector<std::vector<std::vector<Option>>> options_of(M,
                                                           std::vector<std::vector<Option>>(W + 1));
  for (size_t m = 0; m < M; ++m) {
    for (uint32_t w = 0; w <= W; ++w) {
      if (w == 0 && m > 0) {
        if (options.allow_drop) options_of[m][0].push_back({0, 0.0});
        continue;
      }
      const uint32_t n_max = p.devices[m].has_gpu() ? w : 0;
      for (uint32_t n = 0; n <= n_max; ++n) {
        const double l = double(k) * w, lg = double(k) * n;
        if (!device_violation(p, m, l, lg, k, k).empty()) continue;
        const auto t = device_terms(p, m, l, lg, k, 0, MemCase::kFits);
        options_of[m][w].push_back({n, t.compute_s + t.memory_s});
      }
    }
  }
  std::vector<uint32_t> w(M, 0), n(M, 0);
  auto dfs = [&](auto&& self, size_t m, uint32_t left, double acc) -> void {
    if (acc >= best_t) return;
    if (m == M) {
      if (left != 0) return;
      const auto pred = predict(p, w, n);
      if (pred.feasible && pred.tpot_s < best_t) {
        best_t = pred.tpot_s;
        best_a = {w, n, std::vector<bool>(M, false)};
      }
      return;
    }
    const uint32_t rest_min = options.allow_drop ? 0 : static_cast<uint32_t>(M - m - 1);
    for (uint32_t x = 0; x + rest_min <= left; ++x) {
      if (m + 1 == M && x != left) continue;  // the last device takes what is left
      for (const auto& o : options_of[m][x]) {
        w[m] = x;
        n[m] = o.n;
        self(self, m + 1, left - x, acc + o.busy_s);
      }
    }
    w[m] = n[m] = 0;
  };
  dfs(dfs, 0, W, 0.0);
}

}  // namespace

Plan memsched(const Problem& p) {
  const double t0 = now_ms();
  check_problem(p);
  std::vector<double> budget;
  for (const auto& d : p.devices) {
    double b = memory_budget(d);
    if (d.gpu.kind == profile::GpuKind::kCuda) b += static_cast<double>(d.gpu.vram_available_bytes);
    budget.push_back(b);
  }
  Best best;
  for (uint32_t k : valid_rounds(p.model.n_layers, p.devices.size())) {
    best.offer(p, with_gpu_layers(p, proportional_split(budget, p.model.n_layers / k), k));
  }
  return finish(p, best, "memsched", t0);
}

Plan perfsched(const Problem& p) {
  const double t0 = now_ms();
  check_problem(p);
  const size_t M = p.devices.size();
  const double b_kv = p.model.layer_bytes + double(p.model.kv_bytes_per_token) * p.options.ctx;
  std::vector<double> speed(M), cpu_speed(M);
  for (size_t m = 0; m < M; ++m) {
    const double base = device_terms(p, m, 0, 0, 1, 0, MemCase::kFits).compute_s;
    const double cpu = device_terms(p, m, 1, 0, 1, 0, MemCase::kFits).compute_s - base;
    double best_t = cpu;
    if (p.devices[m].has_gpu())
      best_t = std::min(best_t, device_terms(p, m, 1, 1, 1, 0, MemCase::kFits).compute_s - base);
    speed[m] = 1.0 / best_t;
    cpu_speed[m] = 1.0 / cpu;
  }
  std::vector<size_t> by_speed(M);
  std::iota(by_speed.begin(), by_speed.end(), 0);
  std::stable_sort(by_speed.begin(), by_speed.end(),
                   [&](size_t a, size_t b) { return speed[a] > speed[b]; });
  Best best;
  for (uint32_t k : valid_rounds(p.model.n_layers, M)) {
    const uint32_t W = p.model.n_layers / k;
    auto w = proportional_split(speed, W);
    // Windows each device holds without overflowing RAM + VRAM.
    std::vector<uint32_t> cap(M);
    for (size_t m = 0; m < M; ++m) {
      const auto t0m = device_terms(p, m, 0, 0, k, 0, MemCase::kFits);
      const double room = std::max(0.0, t0m.ram_cap - t0m.ram_need);
      uint32_t c = static_cast<uint32_t>(std::floor(room / (k * b_kv)));
      if (p.devices[m].gpu.kind == profile::GpuKind::kCuda) c += gpu_window_cap(p, m, k);
      cap[m] = std::max<uint32_t>(1, c);
    }
    uint32_t excess = 0;
    for (size_t m = 0; m < M; ++m) {
      if (w[m] > cap[m]) {
        excess += w[m] - cap[m];
        w[m] = cap[m];
      }
    }
    for (size_t m : by_speed) {  // migrate to devices with room, fastest first
      const uint32_t give = std::min(excess, cap[m] - std::min(cap[m], w[m]));
      w[m] += give;
      excess -= give;
    }
    if (excess > 0) {  // greedy fallback: CPUs take the rest in proportion to their speed
      const auto extra = spread(cpu_speed, excess);
      for (size_t m = 0; m < M; ++m) w[m] += extra[m];
    }
    best.offer(p, with_gpu_layers(p, std::move(w), k));
  }
  return finish(p, best, "perfsched", t0);
}

Plan exhaustive(const Problem& p, const ExhaustiveOptions& options) {
  const double t0 = now_ms();
  check_problem(p);
  const size_t M = p.devices.size();
  const uint32_t L = p.model.n_layers;
  const double inf = std::numeric_limits<double>::infinity();
  const bool overlap = p.options.model == CostModel::kOverlap;
  // Under the overlap model the head may run no layers.
  const size_t min_members = options.allow_drop ? 1 : overlap ? std::max<size_t>(1, M - 1) : M;
  // Count the w vectors first so a large case fails fast instead of running for hours.
  double count = 0;
  for (uint32_t k : valid_rounds(L, min_members)) {
    const double W = L / k;
    const double parts = double(M);
    const double total = (options.allow_drop ? W + M - 2 : W - 1) + (overlap ? 1 : 0);
    double c = 1;
    for (double i = 1; i <= parts - 1; ++i) c = c * (total - parts + 1 + i) / i;  // C(total, M-1)
    if (overlap) {  // every (w, n) is costed: GPU devices multiply the count
      for (const auto& d : p.devices) c *= d.has_gpu() ? W / double(M) + 1 : 1.0;
    }
    count += c;
  }
  if (count > options.max_candidates) {
    throw UsageError("exhaustive search over " + std::to_string(static_cast<long long>(count)) +
                     " layer splits is too large; use --scheduler halda");
  }
  Assignment best_a;
  double best_t = inf;
  for (uint32_t k : valid_rounds(L, min_members)) {
    if (overlap) {
      exhaustive_overlap(p, options, k, best_a, best_t);
      continue;
    }
    const uint32_t W = L / k;
    // The objective is separable per device at fixed k, so the best n of each (device, w)
    // is found once: cost[m][w] over every n in [0, w].
    auto table = [&](bool ring) {
      std::vector<std::vector<std::pair<double, uint32_t>>> cost(
          M, std::vector<std::pair<double, uint32_t>>(W + 1, {inf, 0}));
      for (size_t m = 0; m < M; ++m) {
        for (uint32_t w = 1; w <= W; ++w) {
          const uint32_t n_max = p.devices[m].has_gpu() ? w : 0;
          for (uint32_t n = 0; n <= n_max; ++n) {
            const auto t =
                device_terms(p, m, double(k) * w, double(k) * n, k, ring ? k : 0, MemCase::kAuto);
            const bool ok = t.vram_need <= t.vram_cap && t.pinned_need <= t.pinned_cap &&
                            !(t.overloaded && t.slow_disk);
            if (ok && t.total_s() < cost[m][w].first) cost[m][w] = {t.total_s(), n};
          }
        }
        if (options.allow_drop && m > 0) cost[m][0] = {0.0, 0};
      }
      return cost;
    };
    if (options.allow_drop) {  // the head alone: no ring, no communication
      const auto solo = table(false);
      if (solo[0][W].first < best_t) {
        best_t = solo[0][W].first;
        best_a = {std::vector<uint32_t>(M, 0), std::vector<uint32_t>(M, 0),
                  std::vector<bool>(M, false)};
        best_a.w[0] = W;
        best_a.n[0] = solo[0][W].second;
      }
    }
    if (M == 1) {
      if (!options.allow_drop) {
        const auto solo = table(false);
        if (solo[0][W].first < best_t)
          best_a = {{W}, {solo[0][W].second}, {false}}, best_t = solo[0][W].first;
      }
      continue;
    }
    const auto cost = table(true);
    std::vector<uint32_t> w(M, 0);
    // Depth-first over compositions of W; the last device takes what is left.
    auto dfs = [&](auto&& self, size_t m, uint32_t left, double acc) -> void {
      if (acc >= best_t) return;  // costs are non-negative: no completion can do better
      const uint32_t lo = (m == 0 || !options.allow_drop) ? 1 : 0;
      if (m + 1 == M) {
        if (left < lo) return;
        const double t = acc + cost[m][left].first;
        if (t < best_t) {
          uint32_t active = 0;
          for (size_t j = 0; j + 1 < M; ++j) active += w[j] > 0;
          if (left > 0) ++active;
          if (active < 2) return;  // the head alone is costed without a ring above
          w[m] = left;
          best_t = t;
          best_a = {w, std::vector<uint32_t>(M, 0), std::vector<bool>(M, false)};
          for (size_t j = 0; j < M; ++j) best_a.n[j] = cost[j][w[j]].second;
        }
        return;
      }
      for (uint32_t x = lo; x + (M - m - 1) * (options.allow_drop ? 0 : 1) <= left; ++x) {
        if (cost[m][x].first == inf) continue;
        w[m] = x;
        self(self, m + 1, left - x, acc + cost[m][x].first);
      }
      w[m] = 0;
    };
    dfs(dfs, 0, W, 0.0);
  }
  if (best_t == inf) {
    Plan plan = no_plan(p, "exhaustive",
                        "no feasible plan: no layer split keeps every device within its limits");
    plan.solve_ms = now_ms() - t0;
    return plan;
  }
  Plan plan = make_plan(p, best_a, "exhaustive");
  plan.solve_ms = now_ms() - t0;
  return plan;
}

Plan schedule(const Problem& p, std::string_view scheduler) {
  if (scheduler == "halda") return halda(p);
  if (scheduler == "memsched") return memsched(p);
  if (scheduler == "perfsched") return perfsched(p);
  if (scheduler == "exhaustive") return exhaustive(p);
  throw UsageError("unknown scheduler '" + std::string(scheduler) +
                   "' (halda, memsched, perfsched, exhaustive)");
}

}  // namespace hearth::plan
