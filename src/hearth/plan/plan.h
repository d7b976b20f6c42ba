// A plan: how many layers each device runs per round (w), how many of those on its GPU (n),
// which devices only relay, and what the cost model predicts for it. JSON schema in
// docs/plan.md (versioned).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "hearth/plan/cost_model.h"

namespace hearth::plan {

inline constexpr int kPlanSchemaVersion = 2;

// A layer assignment, one entry per device of the Problem in ring order. w = 0 means the
// device is not in the ring, unless relay marks it as a zero-load forwarding hop.
struct Assignment {
  std::vector<uint32_t> w;  // (devices) layer window per round
  std::vector<uint32_t> n;  // (devices) GPU layers within the window
  std::vector<bool> relay;  // (devices)
};

struct PlanDevice {
  std::string name;
  uint32_t w = 0, n = 0;
  bool relay = false;
  bool dropped = false;  // in DEVICES.json but given no work
  DeviceCost cost;
};

struct Plan {
  std::string scheduler;                       // "halda", "memsched", "perfsched", "exhaustive"
  CostModel cost_model = CostModel::kOverlap;  // the model that costed it
  std::string model;
  uint32_t L = 0, W = 0, k = 0, ctx = 0;
  bool feasible = false;
  std::string reason;  // why no feasible plan exists, or why this one is not feasible
  double predicted_tpot_ms = 0;
  double solve_ms = 0;
  std::vector<PlanDevice> devices;  // ring order, head first
  // Solver statistics (Halda): set-assignment iterations, ILPs and knapsacks solved.
  uint32_t iterations = 0, ilps = 0, knapsacks = 0;
};

// Costs `a` with the cost model and fills a Plan.
Plan make_plan(const Problem& p, const Assignment& a, std::string scheduler);
// A plan that says no feasible plan exists, and why.
Plan no_plan(const Problem& p, std::string scheduler, std::string reason);

nlohmann::json plan_to_json(const Plan& plan);

}  // namespace hearth::plan
