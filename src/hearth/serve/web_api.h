// What the browser side of the server needs beyond the OpenAI API: which origins may call it
// (CORS), and the snapshot of the ring the /cluster page draws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hearth/serve/device_status.h"
#include "hearth/serve/metrics.h"

namespace hearth::serve {

// --cors: a comma-separated list of origins ("http://host:port", "https://name", "null") or
// "*" for any. UsageError naming an entry that is not an origin.
std::vector<std::string> parse_cors_origins(std::string_view flag);

enum class OriginCheck {
  kNone,     // no Origin header: not a browser's cross-site request (curl, SDKs)
  kSame,     // the page came from this server
  kAllowed,  // another origin that --cors lets in
  kRefused,
};

// A request's Origin against its Host and the allowed origins. A browser sends Origin on
// cross-origin requests (and on same-origin POSTs); refusing the ones not allowed stops a web
// page elsewhere from using a server on this machine or LAN behind its user's back.
OriginCheck check_origin(const std::string* origin, const std::string* host,
                         const std::vector<std::string>& allowed);

// What the plan predicted, when the ring was planned by Halda (--plan auto).
struct PlanFacts {
  double predicted_tpot_ms = 0;  // 0: unknown
  int rounds = 0;                // k; 0: unknown
  // Head -> worker round trips measured when planning, by the worker's control address.
  std::vector<std::pair<std::string, double>> link_rtt_ms;
};

// The /cluster page's data: the devices in ring order with their windows, memory pressure and
// per-token times (the numbers /metrics reports), the ring's losses and rejoins, requests and
// token rates. `tokens_per_s` comes from the caller (it needs two snapshots); the TPOT shown
// is active / tokens_per_s while requests run, else the last request's.
nlohmann::json cluster_json(const std::string& model, const MetricsSnapshot& m,
                            const RingState& ring, const PlanFacts& plan, double tokens_per_s);

}  // namespace hearth::serve
