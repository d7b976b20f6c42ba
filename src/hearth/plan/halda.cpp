#include "hearth/plan/halda.h"

#include <algorithm>
#include <cmath>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/plan/ilp.h"
#include "hearth/plan/knapsack_search.h"
#include "hearth/plan/limits.h"

namespace hearth::plan {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Memory rows are in GiB; keep solutions this far (about 1 KiB) inside their set's region so
// the solver's feasibility tolerance cannot put a device on the wrong side of its RAM bound.
constexpr double kMargin = 1e-6;
// Device selection tries dropping each weak device alone only when there are this few.
constexpr size_t kMaxSingleDropTrials = 6;

// a*w + b*n + c: one device's time or memory need at fixed k and fixed set.
struct Lin {
  double w = 0, n = 0, c = 0;
};

struct DeviceModel {
  Lin over, fits;   // seconds in sets M1-M3 / M4
  Lin ram, pinned;  // bytes
  double ram_cap = 0, pinned_cap = 0;
  uint32_t n_cap = 0;  // GPU layers per window that fit VRAM
  bool slow = false;
};

// The cost model is linear in (w, n) within a set, so three evaluations give its coefficients
// exactly and the ILP objective is the cost model itself, not a re-derivation of it.
DeviceModel linearize(const Problem& p, size_t m, uint32_t k, bool ring) {
  const double hops = ring ? k : 0.0;
  auto at = [&](double w, double n, MemCase mc) {
    return device_terms(p, m, k * w, k * n, k, hops, mc);
  };
  const bool gpu = p.devices[m].has_gpu();
  DeviceModel dm;
  for (MemCase mc : {MemCase::kOverloaded, MemCase::kFits}) {
    const auto t00 = at(0, 0, mc), t10 = at(1, 0, mc);
    const double t11 = gpu ? at(1, 1, mc).total_s() : t10.total_s();
    Lin lin{t10.total_s() - t00.total_s(), t11 - t10.total_s(), t00.total_s()};
    (mc == MemCase::kOverloaded ? dm.over : dm.fits) = lin;
    if (mc == MemCase::kFits) {
      const auto t11f = gpu ? at(1, 1, mc) : t10;
      dm.ram = {t10.ram_need - t00.ram_need, t11f.ram_need - t10.ram_need, t00.ram_need};
      dm.pinned = {t10.pinned_need - t00.pinned_need, t11f.pinned_need - t10.pinned_need,
                   t00.pinned_need};
      dm.ram_cap = t00.ram_cap;
      dm.pinned_cap = t00.pinned_cap;
      dm.slow = t00.slow_disk;
    }
  }
  dm.n_cap = gpu_window_cap(p, m, k);
  return dm;
}

struct Candidate {
  Assignment a;
  double tpot = 0;
};

class Solver {
 public:
  // select: the overlap MILP decides which workers take part (solve_overlap_k).
  Solver(const Problem& p, const std::vector<bool>& active, uint32_t rounds, HaldaStats* stats,
         bool select = false)
      : p_(p), active_(active), stats_(stats), select_(select) {
    for (size_t m = 0; m < active.size(); ++m) {
      if (active[m]) idx_.push_back(m);
    }
    // Under the overlap model the head may run no layers, so W >= members - 1 suffices.
    const bool overlap = p.options.model == CostModel::kOverlap;
    // With selection, any k leaving one layer per round will do: members are bounded by W.
    ks_ = valid_rounds(p.model.n_layers, select_   ? 1
                                         : overlap ? std::max<size_t>(1, idx_.size() - 1)
                                                   : idx_.size());
    if (rounds != 0) std::erase_if(ks_, [&](uint32_t k) { return k != rounds; });
  }

  const std::vector<size_t>& idx() const { return idx_; }
  bool any_k() const { return !ks_.empty(); }

  // Sets from an assignment: true = overloaded (M1-M3), false = M4.
  std::vector<bool> classify(const Assignment& a, const std::vector<bool>& forced) const {
    uint32_t W = 0;
    for (auto x : a.w) W += x;
    const uint32_t k = p_.model.n_layers / W;
    std::vector<bool> sets(p_.devices.size(), false);
    for (size_t m : idx_) {
      const auto t =
          device_terms(p_, m, double(k) * a.w[m], double(k) * a.n[m], k, k, MemCase::kAuto);
      sets[m] = t.overloaded && !t.slow_disk && !forced[m];
    }
    return sets;
  }

  // One ILP per valid k under fixed sets; the best by the cost model.
  std::optional<Candidate> solve(const std::vector<bool>& sets) {
    return best_over_k([&](uint32_t k) { return solve_k(sets, k); });
  }

  // The refinement: one MILP per k in which each device's set is itself decided. For devices
  // that reload incrementally (M1, M3) the reload term max(0, need - cap) / s is convex, so a
  // continuous y >= 0, y >= (need - cap) / s models it exactly; a Metal device (M2) reloads
  // everything once over its working set, a step that takes one binary. Slow disks keep
  // need <= cap. The optimum of these ILPs is the optimum of the cost model.
  std::optional<Candidate> solve_exact() {
    return best_over_k([&](uint32_t k) { return solve_exact_k(k); });
  }

  // The overlap model: one MILP per k (solve_overlap_k).
  std::optional<Candidate> solve_overlap() {
    return best_over_k([&](uint32_t k) { return solve_overlap_k(k); });
  }

 private:
  // The best candidate over every valid k, each solved by `one_k`.
  template <typename OneK>
  std::optional<Candidate> best_over_k(OneK one_k) {
    std::optional<Candidate> best;
    for (uint32_t k : ks_) {
      auto c = one_k(k);
      if (c && (!best || c->tpot < best->tpot)) best = std::move(c);
    }
    return best;
  }

  // The assignment an ILP solution holds ((w, n) variables per active device), costed by the
  // cost model itself; nullopt when the model finds it infeasible.
  std::optional<Candidate> costed(const IlpSolution& sol,
                                  const std::vector<std::pair<int, int>>& vars) {
    Candidate c = from_solution(sol, vars);
    const auto pred = predict(p_, c.a.w, c.a.n);
    if (!pred.feasible) return std::nullopt;
    c.tpot = pred.tpot_s;
    return c;
  }

  Candidate from_solution(const IlpSolution& sol, const std::vector<std::pair<int, int>>& vars) {
    Candidate c;
    c.a.w.assign(p_.devices.size(), 0);
    c.a.n.assign(p_.devices.size(), 0);
    c.a.relay.assign(p_.devices.size(), false);
    for (size_t i = 0; i < idx_.size(); ++i) {
      c.a.w[idx_[i]] = static_cast<uint32_t>(std::llround(sol.x[vars[i].first]));
      c.a.n[idx_[i]] = static_cast<uint32_t>(std::llround(sol.x[vars[i].second]));
    }
    return c;
  }

  // The overlap model at fixed k, exactly (cost_model.h): variables per device w, n (integer),
  // and for a device that may stream z (binary: 0 fits, 1 streams), C (buffer), X (bytes read
  // per token), H (bytes read in idle gaps), e (exposed read seconds); one global t, minimised.
  //   fits:     z = 0 -> E(w, n) = A - cap <= 0 (big-M on z)
  //   buffer:   C_min z <= C <= cap(w, n),  C <= min(cap(0, 0), C_max(0, 0)) z,
  //             C <= C_max(w, n) (add_buffer_share)
  //   read:     X >= E(w, n) + C  (X = A - R; z = 0 gives X = 0 since E <= 0 and C = 0)
  //   hidden:   H <= k (C + B),  H <= X   (B: the disk's burst after an idle gap)
  //   exposed:  s e >= X - H - s T(w, n),  u e >= X - k C - u T(w, n),  e >= 0
  //             (u: the disk's peak rate, the burst's; the second row only when it is known)
  //   idle:     H / s + e + T(w, n) + comm <= t,  X / s <= t
  //   TPOT:     t >= sum_m (T + e + comm)
  // For fixed (w, n) this is the LP predict() solves, so the MILP optimum is the optimum of
  // predict() over all assignments at this k. Plain mmap (streaming off): z = 1 -> e = A / s.
  // Metal devices keep the paper's all-or-nothing reload, with the refinement's binary. Bytes
  // are in GiB so every row is of order one.
  //
  // Device selection (select_): each worker has a binary y, "in the ring", with y <= w <= W y,
  // and every constant of its rows (the cost of taking part at all: fixed compute, its hops,
  // its memory at zero layers) is written as a coefficient of y, so y = 0 removes the device
  // from the ring exactly as predict() does for w = 0. At least one worker takes part (the
  // head alone is solved apart). A solution of a subset is a solution here, so more devices
  // never predict a slower token.
  std::optional<Candidate> solve_overlap_k(uint32_t k) {
    const uint32_t W = p_.model.n_layers / k;
    const bool ring = idx_.size() > 1;
    const double hops = ring ? k : 0.0;
    Ilp ilp;
    ilp.scale = false;
    const int tv = ilp.add_var(1.0, 0, kInf, false);
    IlpRow sum_w{{}, double(W), double(W)};
    IlpRow total{{{tv, -1.0}}, -kInf, 0.0};  // sum of device times - t <= 0
    IlpRow workers{{}, 1.0, kInf};           // select_: sum of y >= 1
    std::vector<std::pair<int, int>> vars;
    int head_u = -1;  // the head's [w >= 1] binary, when it has one
    for (size_t m : idx_) {
      const bool gpu = p_.devices[m].has_gpu();
      const bool head = m == 0;
      const bool optional = select_ && !head;
      auto at = [&](double w, double n, double windows) {
        return overlap_terms(p_, m, k * w, k * n, windows, hops);
      };
      const auto o00 = at(0, 0, k), o10 = at(1, 0, k), o11 = gpu ? at(1, 1, k) : o10;
      const int wv = ilp.add_var(0, head && ring ? 0 : (optional ? 0 : 1), W, true);
      const int nv = ilp.add_var(0, 0, std::min<double>(W, gpu_window_cap(p_, m, k)), true);
      vars.emplace_back(wv, nv);
      sum_w.coefs.emplace_back(wv, 1.0);
      ilp.rows.push_back({{{nv, 1.0}, {wv, -1.0}}, -kInf, 0.0});
      const int yv = optional ? ilp.add_var(0, 0, 1, true) : -1;
      if (optional) {
        ilp.rows.push_back({{{wv, 1.0}, {yv, -double(W)}}, -kInf, 0.0});  // w <= W y
        ilp.rows.push_back({{{wv, 1.0}, {yv, -1.0}}, 0.0, kInf});         // w >= y
        workers.coefs.emplace_back(yv, 1.0);
      }
      // A row's constant term: paid by a device of the ring, on y for an optional one.
      auto constant = [yv](IlpRow& row, double c) {
        if (yv >= 0) {
          row.coefs.emplace_back(yv, c);
        } else {
          row.lo -= c;
          row.hi -= c;
        }
      };
      const Lin pinned{o10.paper.pinned_need - o00.paper.pinned_need,
                       o11.paper.pinned_need - o10.paper.pinned_need, o00.paper.pinned_need};
      IlpRow pinned_row{
          {{wv, pinned.w / kGiB}, {nv, pinned.n / kGiB}}, -kInf, o00.paper.pinned_cap / kGiB};
      constant(pinned_row, pinned.c / kGiB);
      ilp.rows.push_back(pinned_row);

      if (p_.devices[m].gpu.kind == profile::GpuKind::kMetal) {
        add_metal(ilp, total, m, k, W, ring, wv, nv, yv);
        continue;
      }
      // T(w, n) as coefficients plus a constant. A head without layers pays no per-window
      // host<->device copies: binary u = [w >= 1] carries them.
      std::vector<std::pair<int, double>> busy{{wv, o10.busy_s - o00.busy_s},
                                               {nv, o11.busy_s - o10.busy_s}};
      double busy_c = o00.busy_s;
      double comm = o00.paper.comm_s;
      std::vector<std::pair<int, double>> comm_vars;  // comm that depends on a binary
      if (head && ring) {
        const double per_window = o00.busy_s - at(0, 0, 0).busy_s;
        // A head without layers ahead of two or more workers hops once per token, not once per
        // round (predict(): head_wraps): binary v = [w = 0 and two or more workers].
        const bool may_wrap = k > 1 && (select_ || idx_.size() >= 3);
        const double wrap_saving =
            may_wrap ? comm - overlap_terms(p_, m, 0, 0, k, 1.0).paper.comm_s : 0.0;
        if (per_window > 0 || wrap_saving > 0) {
          head_u = ilp.add_var(0, 0, 1, true);
          ilp.rows.push_back({{{wv, 1.0}, {head_u, -double(W)}}, -kInf, 0.0});
          if (per_window > 0) {
            busy.emplace_back(head_u, per_window);
            busy_c -= per_window;
          }
        }
        if (wrap_saving > 0) {
          const int vv = ilp.add_var(0, 0, 1, true);
          ilp.rows.push_back({{{vv, 1.0}, {head_u, 1.0}}, -kInf, 1.0});  // v <= 1 - u
          if (select_) workers.coefs.emplace_back(vv, -1.0);             // v <= sum y - 1
          comm_vars.emplace_back(vv, -wrap_saving);
        }
      }
      for (const auto& [v, c] : busy) total.coefs.emplace_back(v, c);
      for (const auto& [v, c] : comm_vars) total.coefs.emplace_back(v, c);
      constant(total, busy_c + comm);

      // E(w, n) = A - cap and cap(w, n), in GiB.
      const Lin assigned{(o10.assigned_bytes - o00.assigned_bytes) / kGiB,
                         (o11.assigned_bytes - o10.assigned_bytes) / kGiB,
                         o00.assigned_bytes / kGiB};
      const Lin cap{(o10.cap_bytes - o00.cap_bytes) / kGiB, (o11.cap_bytes - o10.cap_bytes) / kGiB,
                    o00.cap_bytes / kGiB};
      const Lin excess{assigned.w - cap.w, assigned.n - cap.n, assigned.c - cap.c};
      const double excess_max =
          std::max(0.0, excess.w * W + std::max(0.0, excess.n) * W + excess.c);
      IlpRow fits{{{wv, excess.w}, {nv, excess.n}}, -kInf, 0.0};  // E + margin <= big z
      constant(fits, excess.c + kMargin);
      if (o00.paper.slow_disk) {  // may not read weights per token: must fit
        ilp.rows.push_back(fits);
        continue;
      }
      const int zv = ilp.add_var(0, 0, 1, true);
      if (optional) ilp.rows.push_back({{{zv, 1.0}, {yv, -1.0}}, -kInf, 0.0});  // z <= y
      fits.coefs.emplace_back(zv, -(excess_max + 2 * kMargin));
      ilp.rows.push_back(fits);
      const int ev = ilp.add_var(0, 0, kInf, false);
      total.coefs.emplace_back(ev, 1.0);
      if (!p_.options.streaming) {
        // Plain mmap over its memory: all of A is read inside compute, e >= A / s when z = 1.
        const double s = disk_read_bps(p_.devices[m]) / kGiB;
        const double a_max =
            std::max(0.0, assigned.w * W + std::max(0.0, assigned.n) * W + assigned.c);
        IlpRow reads{
            {{ev, 1.0}, {wv, -assigned.w / s}, {nv, -assigned.n / s}, {zv, -a_max / s}}, 0.0, kInf};
        constant(reads, (a_max - assigned.c) / s);
        ilp.rows.push_back(reads);
        continue;
      }
      const double s = p_.devices[m].disk_seq_read_bps / kGiB;  // GiB/s
      const double c_min = o00.buffer_min_bytes / kGiB;
      const double c_big = std::max(0.0, std::min(cap.c, o00.buffer_max_bytes / kGiB));
      const int cv = ilp.add_var(0, 0, c_big, false);
      const int xv = ilp.add_var(0, 0, excess_max + c_big, false);
      const int hv = ilp.add_var(0, 0, kInf, false);
      ilp.rows.push_back({{{cv, 1.0}, {zv, -c_min}}, 0.0, kInf});              // C >= C_min z
      ilp.rows.push_back({{{cv, 1.0}, {zv, -c_big}}, -kInf, 0.0});             // C <= big z
      IlpRow within_cap{{{cv, 1.0}, {wv, -cap.w}, {nv, -cap.n}}, -kInf, 0.0};  // C <= cap
      constant(within_cap, -cap.c);
      ilp.rows.push_back(within_cap);
      add_buffer_share(ilp, cv, wv, nv, W, c_min, c_big, o00, o10, o11, constant);
      IlpRow read{{{xv, 1.0}, {cv, -1.0}, {wv, -excess.w}, {nv, -excess.n}}, 0.0, kInf};
      constant(read, -excess.c);
      ilp.rows.push_back(read);
      // H <= k (C + B): each gap fills the buffer, and the disk serves its burst on top.
      const double burst = p_.devices[m].disk_burst_bytes / kGiB;
      ilp.rows.push_back({{{hv, 1.0}, {cv, -double(k)}}, -kInf, k * burst});
      ilp.rows.push_back({{{hv, 1.0}, {xv, -1.0}}, -kInf, 0.0});        // H <= X
      IlpRow exposed{{{xv, 1.0}, {hv, -1.0}, {ev, -s}}, -kInf, 0.0};
      constant(exposed, -s * busy_c);
      IlpRow idle{{{hv, 1.0 / s}, {ev, 1.0}, {tv, -1.0}}, -kInf, 0.0};
      constant(idle, busy_c + comm);
      for (const auto& [v, c] : busy) {
        exposed.coefs.emplace_back(v, -s * c);
        idle.coefs.emplace_back(v, c);
      }
      // What is not in the buffer when a round's compute starts comes at the peak rate at best
      // (a row only where the peak rate is known).
      if (const double peak_rate = p_.devices[m].disk_peak_read_bps / kGiB; peak_rate > 0) {
        IlpRow peak{{{xv, 1.0}, {cv, -double(k)}, {ev, -peak_rate}}, -kInf, 0.0};
        constant(peak, -peak_rate * busy_c);
        for (const auto& [v, c] : busy) peak.coefs.emplace_back(v, -peak_rate * c);
        ilp.rows.push_back(peak);
      }
      for (const auto& [v, c] : comm_vars) idle.coefs.emplace_back(v, c);
      ilp.rows.push_back(exposed);
      ilp.rows.push_back(idle);
      ilp.rows.push_back({{{xv, 1.0 / s}, {tv, -1.0}}, -kInf, 0.0});  // D <= t
    }
    ilp.rows.push_back(sum_w);
    ilp.rows.push_back(total);
    if (select_) ilp.rows.push_back(workers);
    if (stats_) ++stats_->ilps;
    const auto sol = solve_ilp(ilp);
    if (!sol.optimal) return std::nullopt;
    return costed(sol, vars);
  }

  // C <= C_max(w, n) = max(C_min, share(w, n)), where the pressure target's share falls with
  // the KV cache of the device's layers (OverlapTerms::buffer_share_bytes). A maximum is not a
  // convex bound, so where the share can fall below C_min a binary b picks the side:
  // C <= C_min + (big - C_min) b and C <= share + M (1 - b). `constant` adds a row's constant.
  template <typename Constant>
  static void add_buffer_share(Ilp& ilp, int cv, int wv, int nv, uint32_t W, double c_min,
                               double c_big, const OverlapTerms& o00, const OverlapTerms& o10,
                               const OverlapTerms& o11, Constant constant) {
    const Lin share{(o10.buffer_share_bytes - o00.buffer_share_bytes) / kGiB,
                    (o11.buffer_share_bytes - o10.buffer_share_bytes) / kGiB,
                    o00.buffer_share_bytes / kGiB};
    const double low = share.c + std::min(0.0, share.w) * W + std::min(0.0, share.n) * W;
    if (low >= c_big) return;  // never below the constant bound
    IlpRow row{{{cv, 1.0}, {wv, -share.w}, {nv, -share.n}}, -kInf, 0.0};
    if (low >= c_min) {  // never below C_min: the share itself bounds C
      constant(row, -share.c);
      ilp.rows.push_back(row);
      return;
    }
    const int bv = ilp.add_var(0, 0, 1, true);
    IlpRow low_side{{{cv, 1.0}, {bv, -(c_big - c_min)}}, -kInf, 0.0};
    constant(low_side, -c_min);
    ilp.rows.push_back(low_side);
    const double big = c_big - low;
    row.coefs.emplace_back(bv, big);
    constant(row, -share.c - big);
    ilp.rows.push_back(row);
  }

  // A Metal device in the overlap MILP: the paper's terms and its all-or-nothing reload (as in
  // the refinement), added to the TPOT row. yv: its "in the ring" binary, or -1.
  void add_metal(Ilp& ilp, IlpRow& total, size_t m, uint32_t k, uint32_t W, bool ring, int wv,
                 int nv, int yv) {
    const auto dm = linearize(p_, m, k, ring);
    total.coefs.emplace_back(wv, dm.fits.w);
    total.coefs.emplace_back(nv, dm.fits.n);
    const double room = (dm.ram_cap - dm.ram.c) / kGiB;
    IlpRow ram{{{wv, dm.ram.w / kGiB}, {nv, dm.ram.n / kGiB}}, -kInf, dm.ram_cap / kGiB - kMargin};
    if (yv >= 0) {
      total.coefs.emplace_back(yv, dm.fits.c);
      ram.coefs.emplace_back(yv, dm.ram.c / kGiB + kMargin);
      ram.hi += kMargin;
    } else {
      total.hi -= dm.fits.c;
      ram.hi -= dm.ram.c / kGiB;
    }
    if (dm.slow) {
      ilp.rows.push_back(ram);
      return;
    }
    const Lin d{dm.over.w - dm.fits.w, dm.over.n - dm.fits.n, dm.over.c - dm.fits.c};
    const double big_t = std::max(0.0, d.w * W + std::max(0.0, d.n) * W + d.c);
    const double big_r =
        std::max(0.0, (dm.ram.w * W + std::max(0.0, dm.ram.n) * W) / kGiB - room) + 1;
    const int rv = ilp.add_var(0, 0, kInf, false);
    const int zv = ilp.add_var(0, 0, 1, true);
    total.coefs.emplace_back(rv, 1.0);
    // r >= d - big_t (1 - z); need <= cap + big_r z. Off the ring (y = 0): z = 0, r >= 0.
    IlpRow reload{{{rv, 1.0}, {wv, -d.w}, {nv, -d.n}, {zv, -big_t}}, -big_t, kInf};
    if (yv >= 0) {
      reload.coefs.emplace_back(yv, -d.c);
      ilp.rows.push_back({{{zv, 1.0}, {yv, -1.0}}, -kInf, 0.0});  // z <= y
    } else {
      reload.lo += d.c;
    }
    ilp.rows.push_back(reload);
    ram.coefs.emplace_back(zv, -big_r);
    ilp.rows.push_back(ram);
  }

  std::optional<Candidate> solve_exact_k(uint32_t k) {
    const uint32_t W = p_.model.n_layers / k;
    const bool ring = idx_.size() > 1;
    Ilp ilp;
    IlpRow sum_w{{}, double(W), double(W)};
    std::vector<std::pair<int, int>> vars;
    for (size_t m : idx_) {
      const auto dm = linearize(p_, m, k, ring);
      const int wv = ilp.add_var(dm.fits.w, 1, W, true);
      const int nv = ilp.add_var(dm.fits.n, 0, std::min<double>(W, dm.n_cap), true);
      vars.emplace_back(wv, nv);
      sum_w.coefs.emplace_back(wv, 1.0);
      ilp.rows.push_back({{{nv, 1.0}, {wv, -1.0}}, -kInf, 0.0});
      ilp.rows.push_back({{{wv, dm.pinned.w / kGiB}, {nv, dm.pinned.n / kGiB}},
                          -kInf,
                          (dm.pinned_cap - dm.pinned.c) / kGiB});
      const double room = (dm.ram_cap - dm.ram.c) / kGiB;
      IlpRow ram{{{wv, dm.ram.w / kGiB}, {nv, dm.ram.n / kGiB}}, -kInf, kInf};
      if (dm.slow) {
        ram.hi = room - kMargin;
        ilp.rows.push_back(ram);
        continue;
      }
      // Extra seconds when overloaded: over - fits, linear in (w, n).
      const Lin d{dm.over.w - dm.fits.w, dm.over.n - dm.fits.n, dm.over.c - dm.fits.c};
      const int yv = ilp.add_var(1.0, 0, kInf, false);
      IlpRow y{{{yv, 1.0}, {wv, -d.w}, {nv, -d.n}}, d.c, kInf};  // y >= d(w, n)
      if (p_.devices[m].gpu.kind == profile::GpuKind::kMetal) {
        // z = 1: overloaded, pays d; z = 0: must fit.
        const double big_t = std::max(0.0, d.w * W + std::max(0.0, d.n) * W + d.c);
        const double big_r =
            std::max(0.0, (dm.ram.w * W + std::max(0.0, dm.ram.n) * W) / kGiB - room) + 1;
        const int zv = ilp.add_var(0, 0, 1, true);
        y.coefs.emplace_back(zv, -big_t);
        y.lo = d.c - big_t;  // y >= d - big_t * (1 - z)
        ram.coefs.emplace_back(zv, -big_r);
        ram.hi = room - kMargin;  // need <= cap + big_r * z
        ilp.rows.push_back(ram);
      }
      ilp.rows.push_back(y);
    }
    ilp.rows.push_back(sum_w);
    if (stats_) ++stats_->ilps;
    const auto sol = solve_ilp(ilp);
    if (!sol.optimal) return std::nullopt;
    return costed(sol, vars);
  }

  std::optional<Candidate> solve_k(const std::vector<bool>& sets, uint32_t k) {
    const uint32_t W = p_.model.n_layers / k;
    const bool ring = idx_.size() > 1;
    Ilp ilp;
    IlpRow sum_w{{}, double(W), double(W)};
    std::vector<std::pair<int, int>> vars;  // (w var, n var) per active device
    for (size_t m : idx_) {
      const auto dm = linearize(p_, m, k, ring);
      if (dm.slow && sets[m]) return std::nullopt;  // slow disks may not overload
      const Lin& t = sets[m] ? dm.over : dm.fits;
      const int wv = ilp.add_var(t.w, 1, W, true);
      const int nv = ilp.add_var(t.n, 0, std::min<double>(W, dm.n_cap), true);
      vars.emplace_back(wv, nv);
      sum_w.coefs.emplace_back(wv, 1.0);
      ilp.rows.push_back({{{nv, 1.0}, {wv, -1.0}}, -kInf, 0.0});
      IlpRow ram{{{wv, dm.ram.w / kGiB}, {nv, dm.ram.n / kGiB}}, -kInf, kInf};
      const double room = (dm.ram_cap - dm.ram.c) / kGiB;
      if (sets[m]) {
        ram.lo = room + kMargin;
      } else {
        ram.hi = room - kMargin;
      }
      ilp.rows.push_back(ram);
      ilp.rows.push_back({{{wv, dm.pinned.w / kGiB}, {nv, dm.pinned.n / kGiB}},
                          -kInf,
                          (dm.pinned_cap - dm.pinned.c) / kGiB});
    }
    ilp.rows.push_back(sum_w);
    if (stats_) ++stats_->ilps;
    const auto sol = solve_ilp(ilp);
    if (!sol.optimal) return std::nullopt;
    return costed(sol, vars);
  }

  const Problem& p_;
  std::vector<bool> active_;
  HaldaStats* stats_;
  bool select_ = false;
  std::vector<size_t> idx_;
  std::vector<uint32_t> ks_;
};

// "A GPU has free VRAM while another device is overloaded" (Algorithm 1, line 13).
bool needs_calibration(const Problem& p, const Solver& s, const Assignment& a) {
  uint32_t W = 0;
  for (auto x : a.w) W += x;
  const uint32_t k = p.model.n_layers / W;
  const auto pred = predict(p, a.w, a.n);
  for (size_t g : s.idx()) {
    if (!p.devices[g].has_gpu() || a.n[g] >= gpu_window_cap(p, g, k)) continue;
    for (size_t o : s.idx()) {
      if (o == g) continue;
      const bool vram_full_cpu_spill =
          p.devices[o].has_gpu() && a.n[o] >= gpu_window_cap(p, o, k) && a.w[o] > a.n[o];
      if (pred.devices[o].overloaded || vram_full_cpu_spill) return true;
    }
  }
  return false;
}

// The overlap model with device selection by the MILP (HaldaOptions::milp): the best of the
// ring the MILP selects (one worker or more) and the head alone.
std::optional<Assignment> overlap_select(const Problem& p, const HaldaOptions& options,
                                         HaldaStats* stats) {
  const size_t N = p.devices.size();
  std::optional<Candidate> best;
  if (N > 1) {
    Solver ring(p, std::vector<bool>(N, true), options.rounds, stats, /*select=*/true);
    if (ring.any_k()) best = ring.solve_overlap();
  }
  std::vector<bool> head_only(N, false);
  head_only[0] = true;
  Solver alone(p, head_only, options.rounds, stats);
  if (alone.any_k()) {
    if (auto c = alone.solve_overlap(); c && (!best || c->tpot < best->tpot)) best = std::move(c);
  }
  if (!best) return std::nullopt;
  return best->a;
}

}  // namespace

std::optional<Assignment> halda_assign(const Problem& p, const std::vector<bool>& active,
                                       const HaldaOptions& options, HaldaStats* stats) {
  if (active.size() != p.devices.size() || !active[0]) {
    throw UsageError("halda: the head device must be part of every ring");
  }
  Solver solver(p, active, options.rounds, stats);
  if (!solver.any_k()) return std::nullopt;  // fewer layers than devices
  if (p.options.model == CostModel::kOverlap) {
    // The overlap model is exact in one MILP per k; Algorithm 1's set iteration does not apply.
    auto best = solver.solve_overlap();
    if (!best) return std::nullopt;
    return best->a;
  }
  const uint32_t L = p.model.n_layers;
  const size_t N = p.devices.size();

  // Line 1: w proportional to memory budgets (W = L, k = 1), n = 0.
  std::vector<double> budgets;
  for (size_t m : solver.idx()) budgets.push_back(memory_budget(p.devices[m]));
  const auto split = proportional_split(budgets, L);
  Assignment cur{std::vector<uint32_t>(N, 0), std::vector<uint32_t>(N, 0),
                 std::vector<bool>(N, false)};
  for (size_t i = 0; i < solver.idx().size(); ++i) cur.w[solver.idx()[i]] = split[i];

  std::vector<bool> forced(N, false);
  std::optional<std::vector<bool>> prev_sets;
  std::optional<Candidate> best;
  for (uint32_t iter = 0; iter < options.max_iterations; ++iter) {
    const auto sets = solver.classify(cur, forced);
    if (prev_sets && *prev_sets == sets) break;
    prev_sets = sets;
    if (stats) ++stats->iterations;
    auto c = solver.solve(sets);
    if (!c) break;
    if (!best || c->tpot < best->tpot) best = c;
    if (needs_calibration(p, solver, c->a)) {
      // Line 14: the overloaded device with the slowest disk goes to M4-force.
      std::optional<size_t> pick;
      for (size_t m : solver.idx()) {
        if (!sets[m] || forced[m]) continue;
        if (!pick || disk_read_bps(p.devices[m]) < disk_read_bps(p.devices[*pick])) pick = m;
      }
      if (pick) {
        forced[*pick] = true;
        continue;
      }
    }
    cur = c->a;
  }
  if (options.refine) {
    if (auto exact = solver.solve_exact(); exact && (!best || exact->tpot < best->tpot))
      best = exact;
  }
  if (!best) return std::nullopt;
  return best->a;
}

void add_relays(const Problem& p, Assignment& a) {
  const size_t N = p.devices.size();
  a.relay.assign(N, false);
  std::vector<size_t> ring;
  for (size_t m = 0; m < N; ++m) {
    if (a.w[m] > 0) ring.push_back(m);
  }
  if (ring.size() < 2) return;
  for (size_t i = 0; i < ring.size(); ++i) {
    const size_t from = ring[i], to = ring[(i + 1) % ring.size()];
    size_t cur = from;
    while (!p.devices[cur].can_reach(p.devices[to].name)) {
      // Hop to the furthest dropped device between cur and `to` that cur can reach.
      std::optional<size_t> hop;
      for (size_t j = (cur + 1) % N; j != to; j = (j + 1) % N) {
        if (p.devices[cur].can_reach(p.devices[j].name)) hop = j;
      }
      if (!hop) {
        throw UsageError("ring cannot connect '" + p.devices[from].name + "' to '" +
                         p.devices[to].name + "'");
      }
      a.relay[*hop] = true;
      cur = *hop;
    }
  }
}

namespace {

std::string infeasible_reason(const Problem& p) {
  double budget = 0, vram = 0, fast_budget = 0;
  bool any_fast = false;
  for (const auto& d : p.devices) {
    budget += memory_budget(d);
    if (d.gpu.kind == profile::GpuKind::kCuda)
      vram += static_cast<double>(d.gpu.vram_available_bytes);
    if (disk_read_bps(d) >= p.options.slow_disk_bps) any_fast = true;
    fast_budget += memory_budget(d);
  }
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "no feasible plan: model '%s' needs %.2f GiB of weights plus %.2f GiB of KV cache at ctx %u; "
      "the devices offer %.2f GiB of RAM and %.2f GiB of VRAM%s, and no assignment of %u layers "
      "keeps every device within its limits",
      p.model.name.c_str(), p.model.total_weight_bytes() / kGiB,
      double(p.model.kv_bytes_per_token) * p.options.ctx * p.model.n_layers / kGiB, p.options.ctx,
      budget / kGiB, vram / kGiB,
      any_fast ? "" : ", and every disk is too slow to reload weights from", p.model.n_layers);
  (void)fast_budget;
  return buf;
}

}  // namespace

Plan halda(const Problem& p, const HaldaOptions& options) {
  const double t0 = now_ms();
  check_problem(p);
  HaldaStats stats;
  std::vector<bool> active(p.devices.size(), true);
  // By default the knapsack search solves assignment and selection at once, under either
  // model. With `milp`, the overlap model's MILP selects devices itself; the paper's model runs
  // Algorithm 1 and the drop loop below.
  const bool searched = options.select_devices && !options.milp;
  if (!searched && p.options.model == CostModel::kOverlap && p.model.expert_bytes > 0) {
    // The MILP's rows are linear in the bytes over memory; a mixture's reads are not (experts
    // leave memory first and are read by their share). The knapsack search costs them exactly.
    throw UsageError(
        "halda: the overlap model's MILP (--solver ilp, --no-select) does not model a "
        "mixture of experts; the default search does");
  }
  const bool milp_selects =
      options.select_devices && options.milp && p.options.model == CostModel::kOverlap;
  std::optional<Assignment> best;
  if (searched) {
    if (auto found = knapsack_search(p, options.rounds)) {
      stats.knapsacks = found->knapsacks;
      best = std::move(found->a);
    }
  } else if (milp_selects) {
    best = overlap_select(p, options, &stats);
  } else {
    best = halda_assign(p, active, options, &stats);
  }
  const bool selected = searched || milp_selects;
  if (!best && !selected) {
    // Every device must take a window, so one that cannot hold even a single layer (its KV
    // cache does not fit, or it would overload a slow disk) makes the whole ring infeasible.
    bool dropped = false;
    for (size_t m = 1; m < p.devices.size(); ++m) {
      bool can = false;
      const uint32_t n_max = gpu_window_cap(p, m, 1) > 0 ? 1 : 0;
      for (uint32_t n = 0; n <= n_max && !can; ++n)
        can = device_violation(p, m, 1, n, 1, 1).empty();
      if (!can) {
        active[m] = false;
        dropped = true;
      }
    }
    if (dropped) best = halda_assign(p, active, options, &stats);
  }
  if (!best) {
    std::string why = infeasible_reason(p);
    if (options.rounds != 0) {
      why = "with k = " + std::to_string(options.rounds) + " rounds per token (k must divide the " +
            std::to_string(p.model.n_layers) +
            " layers and leave each device a layer per round): " + why;
    }
    Plan plan = no_plan(p, "halda", why);
    plan.solve_ms = now_ms() - t0;
    plan.iterations = stats.iterations;
    plan.ilps = stats.ilps;
    return plan;
  }
  add_relays(p, *best);
  double cur = predict(p, best->w, best->n, best->relay).tpot_s;
  while (options.select_devices && !selected) {
    // Candidates: devices given one window or less (never the head). The paper drops them
    // all at once. A device can also end at w = 1 only because it ties with a better one, so
    // dropping each alone is tried as well (up to kMaxSingleDropTrials candidates, to bound
    // the solve time on large pools).
    std::vector<size_t> weak;
    for (size_t m = 1; m < p.devices.size(); ++m) {
      if (active[m] && best->w[m] <= 1) weak.push_back(m);
    }
    if (weak.empty()) break;
    // Each trial ring is solved from scratch; the fastest is kept if it beats the current.
    std::optional<Assignment> pick;
    std::vector<bool> pick_active;
    double pick_t = cur * (1 - 1e-12);
    auto try_ring = [&](const std::vector<bool>& next) {
      auto cand = halda_assign(p, next, options, &stats);
      if (!cand) return;
      add_relays(p, *cand);
      const double t = predict(p, cand->w, cand->n, cand->relay).tpot_s;
      if (t < pick_t) {
        pick = std::move(cand);
        pick_active = next;
        pick_t = t;
      }
    };
    auto all = active;
    for (size_t m : weak) all[m] = false;
    try_ring(all);
    if (weak.size() > 1 && weak.size() <= kMaxSingleDropTrials) {
      for (size_t m : weak) {
        auto one = active;
        one[m] = false;
        try_ring(one);
      }
    }
    const bool improved = pick.has_value();
    if (improved) {
      best = std::move(pick);
      active = pick_active;
      cur = pick_t;
    }
    if (!improved) break;
  }
  Plan plan = make_plan(p, *best, "halda");
  plan.solve_ms = now_ms() - t0;
  plan.iterations = stats.iterations;
  plan.ilps = stats.ilps;
  plan.knapsacks = stats.knapsacks;
  return plan;
}

}  // namespace hearth::plan
