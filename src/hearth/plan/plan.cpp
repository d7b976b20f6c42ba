#include "hearth/plan/plan.h"

#include <nlohmann/json.hpp>

namespace hearth::plan {

Plan make_plan(const Problem& p, const Assignment& a, std::string scheduler) {
  const auto pred = predict(p, a.w, a.n, a.relay);
  Plan plan;
  plan.scheduler = std::move(scheduler);
  plan.cost_model = p.options.model;
  plan.model = p.model.name;
  plan.L = p.model.n_layers;
  plan.W = pred.W;
  plan.k = pred.k;
  plan.ctx = p.options.ctx;
  plan.feasible = pred.feasible;
  plan.reason = pred.reason;
  plan.predicted_tpot_ms = pred.tpot_s * 1e3;
  for (size_t m = 0; m < p.devices.size(); ++m) {
    PlanDevice d;
    d.name = p.devices[m].name;
    d.w = a.w[m];
    d.n = a.n[m];
    d.relay = pred.devices[m].relay;
    // Under the overlap model the head takes part without layers (embedding, output, hops).
    const bool head_only = m == 0 && p.options.model == CostModel::kOverlap;
    d.dropped = a.w[m] == 0 && !d.relay && !head_only;
    d.cost = pred.devices[m];
    plan.devices.push_back(std::move(d));
  }
  return plan;
}

Plan no_plan(const Problem& p, std::string scheduler, std::string reason) {
  Plan plan;
  plan.scheduler = std::move(scheduler);
  plan.cost_model = p.options.model;
  plan.model = p.model.name;
  plan.L = p.model.n_layers;
  plan.ctx = p.options.ctx;
  plan.feasible = false;
  plan.reason = std::move(reason);
  for (const auto& d : p.devices) plan.devices.push_back({d.name, 0, 0, false, true, {}});
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : plan.devices) {
    nlohmann::json j = {{"name", d.name}, {"w", d.w}, {"n", d.n}};
    if (d.relay) j["relay"] = true;
    if (d.dropped) j["dropped"] = true;
    if (!d.dropped) {
      j["layers"] = d.cost.layers;
      j["gpu_layers"] = d.cost.gpu_layers;
      j["compute_ms"] = d.cost.compute_s * 1e3;
      j["memory_ms"] = d.cost.memory_s * 1e3;
      j["disk_ms"] = d.cost.disk_s * 1e3;
      j["comm_ms"] = d.cost.comm_s * 1e3;
      j["exposed_ms"] = d.cost.exposed_s * 1e3;
      j["overloaded"] = d.cost.overloaded;
      j["assigned_bytes"] = d.cost.assigned_bytes;
      j["weight_budget_bytes"] = d.cost.weight_budget_bytes;
      j["stream_bytes"] = d.cost.stream_bytes;
      j["stream_buffer_bytes"] = d.cost.stream_buffer_bytes;
      j["expert_read_bytes"] = d.cost.expert_read_bytes;
    }
    devs.push_back(std::move(j));
  }
  nlohmann::json j = {{"schema", kPlanSchemaVersion},
                      {"scheduler", plan.scheduler},
                      {"cost_model", cost_model_name(plan.cost_model)},
                      {"model", plan.model},
                      {"L", plan.L},
                      {"ctx", plan.ctx},
                      {"feasible", plan.feasible},
                      {"devices", devs},
                      {"solve_ms", plan.solve_ms}};
  if (plan.feasible) {
    j["k"] = plan.k;
    j["W"] = plan.W;
    j["predicted_tpot_ms"] = plan.predicted_tpot_ms;
  } else {
    j["k"] = nullptr;
    j["predicted_tpot_ms"] = nullptr;
    j["reason"] = plan.reason;
    if (plan.W > 0) j["infeasible_tpot_ms"] = plan.predicted_tpot_ms;
  }
  if (plan.iterations) j["iterations"] = plan.iterations;
  if (plan.ilps) j["ilps"] = plan.ilps;
  if (plan.knapsacks) j["knapsacks"] = plan.knapsacks;
  return j;
}

}  // namespace hearth::plan
