// The head of a ring (hearth run and hearth serve with --workers): the flags that name the
// workers (addresses, or `auto` for those announcing on the LAN) and the plan, and the step
// that turns them into a ring that re-plans when it loses or gains a device (docs/ring.md).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "auto_plan_flags.h"
#include "hearth/cluster/auto_plan.h"
#include "hearth/cluster/recovering_ring.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/discovery.h"
#include "link_options.h"
#include "model_options.h"

namespace hearth::cli {

struct RingFlags {
  std::string workers;  // "tcp://H:P,tcp://H:P" or "auto"; empty: no ring
  std::string plan = "even";
  AutoPlanFlags auto_plan;
  LinkFlags link;
  std::string discovery;  // GROUP[:PORT] of LAN announcements
  double discover_s = 3;  // --workers auto: how long to listen before forming the ring
  std::string pipeline_chunk = "auto";  // --pipeline-chunk: tokens per prefill chunk
  bool prefill_serial = false;          // --prefill-serial: chunks one after another
  bool ring() const { return !workers.empty(); }
};

// --workers, --plan, the --plan auto flags, the link flags, --recover, discovery and
// --pipeline-chunk.
void add_ring_options(CLI::App& app, RingFlags& f);

// --pipeline-chunk into `ro` (auto, or a number of tokens; 0: serial). UsageError naming it.
void apply_pipeline_chunk(const RingFlags& f, cluster::RingOptions& ro);

struct HeadRing {
  std::unique_ptr<net::DiscoveryListener> discovery;  // --workers auto: kept for later joins
  std::optional<cluster::AutoPlan> auto_plan;         // --plan auto: the first plan
  std::unique_ptr<cluster::RecoveringRing> ring;
};

// Finds the workers (--workers auto: those announcing this model with this cluster key),
// plans (manual, even or Halda) and forms the first ring. `base` holds the options every ring
// of this head shares (threads, residency, context, sequences); its workers, plan and link
// keys are filled in here. Under --plan auto a re-plan after a loss or a join runs Halda
// again on the profiles gathered; otherwise the lost device's layers go to the others in
// proportion. Throws UsageError (bad flags, no worker found, no feasible plan) or NetError.
HeadRing start_head_ring(const gguf::GgufFile& file, const ModelOptions& mo, const RingFlags& f,
                         cluster::RingOptions base, std::string_view who);

}  // namespace hearth::cli
