// Halda's exact solve with device selection, without an ILP solver, under either cost model.
// Used by halda() by default; the ILPs (halda.cpp) stay as the reference it is tested against.
//
// Why it can be exact and fast: the paper's model is a sum of per-device terms once k is
// fixed. Under the overlap model, at a trial TPOT tau each device's share of the token is a
// function of its own load alone. Its read-ahead can use idle gaps of length tau - its own
// busy time, so its exposed read time e(tau) is the closed form of cost_model.cpp's ring LP;
// every other term is linear in (w, n). The best assignment at tau is then a knapsack over
// devices (W layers per round, each device taking 0 or more), solved by dynamic programming
// in O(devices * W^2). The smallest tau whose best assignment costs <= tau is the optimum:
// costs fall as tau grows, so the test is monotone. The search starts from a feasible plan,
// re-costs each plan it finds with predict() and asks the knapsack for a plan below that
// (a Dinkelbach-style descent), across every valid k, each k probed first at the incumbent so
// a k that cannot beat it costs one knapsack.
#pragma once

#include <cstdint>
#include <optional>

#include "hearth/plan/plan.h"

namespace hearth::plan {

struct SearchResult {
  Assignment a;
  double tpot_s = 0;  // predict() of `a`
  uint32_t knapsacks = 0;
};

// The optimum over all subsets containing the head (head alone included) and all k (or only
// `rounds` when non-zero). nullopt when no assignment is feasible.
std::optional<SearchResult> knapsack_search(const Problem& p, uint32_t rounds = 0);

}  // namespace hearth::plan
