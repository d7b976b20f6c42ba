// `hearth run --workers ... --plan auto` (issue 5): before the ring is set up, the head
// greets every worker, asks for its device profile (the worker profiles itself on first
// request, cached on disk), times the link to it with the ring's own transport, then says
// Stop. It builds the DEVICES set (head first, ring order), runs Halda on the model profile
// of the actual file, and returns the windows for RingSource plus the workers to use.
//
// Links: the head can only time its own connections, so device m's link to device m+1 is
// taken to be the head's measured link to device m+1 (the last worker's link back to the
// head is the head's link to it). On one LAN segment, or on one host, these agree.
// Dropped devices: Halda's device selection may give a worker no layers; it is left out of
// the ring, and having been told Stop it idles, waiting for a head. A plan that keeps a
// device as a zero-load relay (only with `reachable` lists, which profiles do not carry)
// gets w = 1 there instead: the ring cannot forward without computing yet.
#pragma once

#include <string>
#include <vector>

#include "hearth/cluster/recovering_ring.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/transport.h"
#include "hearth/plan/plan.h"
#include "hearth/plan/prefill.h"
#include "hearth/profile/device_profile.h"

namespace hearth::cluster {

struct AutoPlanOptions {
  std::vector<std::string> workers;  // control addresses in ring order
  uint32_t ctx = 4096;               // context length the plan is costed for
  compute::KvTypes kv_types = {};    // KV cache types the plan's memory terms count
  int handshake_timeout_ms = 5000;
  int profile_timeout_ms = 120000;  // a worker measuring itself for the first time
  int link_probes = 7;              // messages of each kind; the median is kept
  bool select_devices = true;       // false: Halda keeps every device (hearth plan --no-select)
  plan::CostModel cost_model = plan::CostModel::kOverlap;  // hearth plan --cost-model
  uint32_t rounds = 0;  // 0: Halda picks k; else only this k (hearth plan --rounds)
  net::TransportOptions transport;
};

struct LinkMeasure {
  double rtt_s = 0;          // median Ping -> Pong
  double hidden_s = 0;       // median Activations(one hidden state) -> Pong
  double bandwidth_bps = 0;  // hidden-state bytes / (hidden_s - rtt_s), floored at 1 us
};

struct AutoPlan {
  plan::Plan plan;                              // Halda's plan over all devices
  plan::Problem problem;                        // what Halda solved (devices, model, ctx)
  std::vector<profile::DeviceProfile> devices;  // (1 + workers) head first, as planned
  std::vector<LinkMeasure> links;               // (workers) head -> worker i
  std::vector<std::string> addresses;           // (workers) control address of device i + 1
  std::vector<std::string> workers;             // the workers kept, ring order
  std::vector<int> w;                           // (1 + kept workers) windows for RingSource
  std::vector<std::string> dropped;             // addresses told to idle
  bool clamped = false;                         // a relay was given w = 1
};

// `head` is this device's profile (name, link filled in here). Throws NetError naming the
// worker that does not answer, UsageError when a worker runs another model, sends no usable
// profile, or Halda finds no feasible plan (the message carries Halda's reason).
AutoPlan plan_ring(const gguf::GgufFile& file, profile::DeviceProfile head,
                   const AutoPlanOptions& options);

// The Replan of --plan auto: Halda again over the workers given, on the profiles and links
// `first` gathered (a worker new to this head is greeted and measured once). `base` gives
// every other ring option. A ring of the head alone takes every layer. `file` must outlive it.
Replan halda_replan(const gguf::GgufFile& file, const AutoPlan& first, AutoPlanOptions o,
                    RingOptions base);

nlohmann::json auto_plan_to_json(const AutoPlan& a);

// The cost model's TPOT for the chosen plan at another context length (the KV cache a run
// actually had, e.g. prompt + half the generated tokens), in ms.
double predicted_tpot_ms_at(const AutoPlan& a, uint32_t ctx);

// The prefill terms of the chosen plan's devices (plan/prefill.h): TTFT per chunk size.
plan::PrefillModel prefill_model_of(const AutoPlan& a);

// Speculative decoding: the cost model's time of one trip carrying `rows` rows of one
// sequence (plan::verify_trip_s), in ms.
double predicted_verify_trip_ms(const AutoPlan& a, int64_t rows);

}  // namespace hearth::cluster
