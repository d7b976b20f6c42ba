// Schedulers to compare Halda with, all costed by the same cost model:
//  - MemSched (exo's rule, prima.cpp without Halda): windows proportional to memory budgets
//    (RAM, Metal working set, RAM + swappable on Android, plus VRAM on CUDA devices), GPU
//    layers up to what VRAM holds.
//  - PerfSched (Galaxy's rule, paper A.10): windows proportional to compute speed (per-layer
//    time on the device's fastest backend); windows that overflow a device's RAM + VRAM move
//    to devices with room, fastest first; what no device has room for goes to the CPUs in
//    proportion to CPU speed (they reload it from disk).
//  - Exhaustive: every w with sum dividing L, every n; the optimum of the cost model. Small
//    cases only.
// The paper's baselines run at a fixed k; here each baseline tries every valid k and keeps
// its best, so the comparison with Halda isolates the layer split rule.
#pragma once

#include <string_view>

#include "hearth/plan/plan.h"

namespace hearth::plan {

Plan memsched(const Problem& p);
Plan perfsched(const Problem& p);

struct ExhaustiveOptions {
  bool allow_drop = false;      // non-head devices may get w = 0 (device selection)
  double max_candidates = 5e7;  // UsageError beyond this many w vectors
};
Plan exhaustive(const Problem& p, const ExhaustiveOptions& options = {});

// "halda" | "memsched" | "perfsched" | "exhaustive"; UsageError otherwise.
Plan schedule(const Problem& p, std::string_view scheduler);

}  // namespace hearth::plan
