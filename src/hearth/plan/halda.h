// Halda (paper v2 §3.3): the layer-to-device assignment and the set of devices minimising
// predicted TPOT.
//
// halda() solves both at once, exactly, by the knapsack search of knapsack_search.h (under
// either cost model; `hearth bench plan` times it, docs/plan.md has the figures): it finds the
// optimum over every subset of devices that keeps the head, so more candidate devices never
// predict a slower token. The ILPs below are the paper's way and the reference the search is
// tested against; HaldaOptions::milp selects them, and halda_assign() is Algorithm 1 on a fixed
// set.
//
// Under the overlap cost model (cost_model.h) steps 1-4 are one MILP per valid k that is the
// model itself (integer w, n; per device a binary fits/streams, its buffer, bytes read and
// exposed time; the global TPOT minimised), so the assignment is the model's optimum; the
// head may get w = 0. Step 5 is the same. Under the paper's model:
//
// 1. w proportional to memory budgets, n = 0, which puts each device in a set: overloaded
//    (M1/M2/M3 by OS) or not (M4; slow disks are always M4).
// 2. For every valid k (divisor of L with W = L/k >= devices) solve one ILP with CBC: integer
//    w_m >= 1, 0 <= n_m <= w_m, sum w = W, the RAM bound of each device's set, the VRAM bound;
//    the objective is the cost model itself, which is linear in (w, n) once k and the sets
//    are fixed. Keep the best k.
// 3. Reassign sets from the new (w, n); repeat until the sets stop changing. Calibration: if
//    a GPU has free VRAM while another device is overloaded, force the overloaded device with
//    the slowest disk into M4 and solve again.
// 4. Refinement (ours, on by default; `refine = false` leaves the paper's loop alone): one
//    more ILP per k in which the sets are variables too — the incremental reload of M1/M3 is
//    convex (max(0, need - cap) / s, one continuous variable), the all-or-nothing reload of
//    M2 takes one binary per Metal device. Algorithm 1 can stay in the sets it starts from
//    (a device that starts in M4 never becomes overloaded, and two devices cannot trade
//    sets in one step); on random rings it misses the optimum of the cost model in a few
//    percent of cases, which this step removes. Halda keeps the better of the two.
// 5. Device selection: drop devices given w <= 1 (never the head) and solve again, keeping the
//    smaller ring if its TPOT is lower; a dropped device stays as a zero-load relay when the
//    ring needs it to connect two devices that cannot reach each other.
#pragma once

#include <optional>
#include <vector>

#include "hearth/plan/plan.h"

namespace hearth::plan {

struct HaldaOptions {
  bool refine = true;
  bool select_devices = true;
  uint32_t max_iterations = 100;
  // 0: Halda picks the rounds per token k; otherwise only this k is considered (to measure a
  // plan against the best one with another k). No feasible plan when k does not divide L or
  // leaves fewer layers per round than the ring has members.
  uint32_t rounds = 0;
  // Overlap model with selection: solve with one MILP per k (CBC) instead of the knapsack
  // search (knapsack_search.h). Both are exact; the tests compare them.
  bool milp = false;
};

struct HaldaStats {
  uint32_t iterations = 0;  // set assignments tried
  uint32_t ilps = 0;        // ILPs solved
  uint32_t knapsacks = 0;   // knapsacks solved by the overlap search
};

// Algorithm 1 on the devices marked in `active` (index 0, the head, must be active); the
// inactive ones get w = n = 0. nullopt when no assignment satisfies the constraints.
std::optional<Assignment> halda_assign(const Problem& p, const std::vector<bool>& active,
                                       const HaldaOptions& options, HaldaStats* stats);

// The whole scheduler: assignment, device selection, relays. Never throws for an infeasible
// problem: the plan says "no feasible plan" and why.
Plan halda(const Problem& p, const HaldaOptions& options = {});

// Marks as relays the dropped devices the ring needs so that each active device can reach
// the next active one (devices' `reachable` lists). UsageError if no relay path exists.
void add_relays(const Problem& p, Assignment& a);

}  // namespace hearth::plan
