// --plan auto on the head of a ring (hearth run, hearth serve): the flags that shape Halda's
// plan, and the step that profiles this device, gathers the workers' profiles and links,
// solves and prints the plan (docs/ring.md).
#pragma once

#include "hearth/net/curve.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hearth/cluster/auto_plan.h"
#include "hearth/gguf/gguf_file.h"
#include "model_options.h"

namespace hearth::cli {

struct AutoPlanFlags {
  std::string profile_file;  // this device's profile from a file instead of measuring
  bool no_select = false;
  std::string cost_model = "overlap";
  uint32_t rounds = 0;  // 0: Halda picks k
  // Memory this device keeps beside its part of the ring (a draft model and its KV cache):
  // taken off its available memory before Halda plans.
  uint64_t head_reserved_bytes = 0;
};

void add_auto_plan_options(CLI::App& app, AutoPlanFlags& f);

// What Halda is asked for: the flags, the context (-c, else the model's, at most 4096) and
// the links' keys.
cluster::AutoPlanOptions auto_plan_options(const gguf::GgufFile& file, const ModelOptions& mo,
                                           const std::vector<std::string>& workers,
                                           const AutoPlanFlags& flags,
                                           const net::CurveConfig& curve);

// Throws UsageError when Halda finds no feasible plan. `who` prefixes the lines printed.
cluster::AutoPlan make_auto_plan(const gguf::GgufFile& file, const ModelOptions& mo,
                                 const std::vector<std::string>& workers,
                                 const AutoPlanFlags& flags, std::string_view who,
                                 const net::CurveConfig& curve = {});

}  // namespace hearth::cli
