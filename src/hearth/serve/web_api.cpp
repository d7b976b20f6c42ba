#include "hearth/serve/web_api.h"

#include <fmt/core.h>

#include <algorithm>

#include "hearth/base/error.h"

namespace hearth::serve {

using nlohmann::json;

namespace {

// scheme://host[:port], nothing after: what browsers put in Origin.
bool is_origin(std::string_view o) {
  if (o == "null") return true;
  size_t rest = 0;
  if (o.substr(0, 7) == "http://") {
    rest = 7;
  } else if (o.substr(0, 8) == "https://") {
    rest = 8;
  } else {
    return false;
  }
  const std::string_view host = o.substr(rest);
  return !host.empty() && host.size() <= 255 &&
         host.find_first_of("/?#@ \t\r\n") == std::string_view::npos;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string> parse_cors_origins(std::string_view flag) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= flag.size()) {
    const size_t comma = std::min(flag.find(',', start), flag.size());
    std::string_view o = trim(flag.substr(start, comma - start));
    while (!o.empty() && o.back() == '/') o.remove_suffix(1);  // "http://x/" is "http://x"
    if (o != "*" && !is_origin(o)) {
      throw UsageError(fmt::format(
          "--cors: '{}' is not an origin (expected http://HOST[:PORT], https://HOST[:PORT], "
          "null, or * for any)",
          o));
    }
    out.emplace_back(o);
    start = comma + 1;
  }
  return out;
}

OriginCheck check_origin(const std::string* origin, const std::string* host,
                         const std::vector<std::string>& allowed) {
  if (!origin) return OriginCheck::kNone;
  if (host && (*origin == "http://" + *host || *origin == "https://" + *host)) {
    return OriginCheck::kSame;
  }
  for (const auto& a : allowed) {
    if (a == "*" || a == *origin) return OriginCheck::kAllowed;
  }
  return OriginCheck::kRefused;
}

json cluster_json(const std::string& model, const MetricsSnapshot& m, const RingState& ring,
                  const PlanFacts& plan, double tokens_per_s) {
  auto or_null = [](double v) { return v > 0 ? json(v) : json(nullptr); };
  json devices = json::array();
  for (const DevicePressure& p : m.devices) {
    json rtt = nullptr;
    for (const auto& [address, ms] : plan.link_rtt_ms) {
      if (address == p.address) rtt = ms;
    }
    json windows = json::array();
    for (const auto& [b, e] : p.windows) windows.push_back({b, e});
    devices.push_back({{"name", p.name},
                       {"address", p.address},
                       {"windows", std::move(windows)},
                       {"pressure", p.pressure},
                       {"pressure_max", p.pressure_max},
                       {"steps", p.steps},
                       {"compute_ms", ring.ring ? json(p.compute_ms) : json(nullptr)},
                       {"wait_ms", ring.ring ? json(p.wait_ms) : json(nullptr)},
                       {"disk_mb", ring.ring ? json(p.disk_bytes / 1e6) : json(nullptr)},
                       {"reload_mb", ring.ring ? json(p.reload_bytes / 1e6) : json(nullptr)},
                       {"link_rtt_ms", rtt}});
  }
  // While requests run, each of the `active` sequences gets one token per step: a stream's time
  // per token is active / rate. Between requests, the last one's mean.
  const double tpot_ms = m.active > 0 && tokens_per_s > 0
                             ? 1e3 * static_cast<double>(m.active) / tokens_per_s
                             : m.last_tpot_s * 1e3;
  return {{"model", model},
          {"ring", ring.ring},
          {"devices_at_start", ring.devices_at_start},
          {"recoveries", ring.recoveries},
          {"rejoins", ring.rejoins},
          {"lost", ring.lost},
          {"rounds", plan.rounds > 0 ? json(plan.rounds) : json(nullptr)},
          {"predicted_tpot_ms", or_null(plan.predicted_tpot_ms)},
          {"tpot_ms", or_null(tpot_ms)},
          {"tokens_per_s", tokens_per_s},
          {"tokens_generated", m.generated_tokens},
          {"active", m.active},
          {"queued", m.waiting},
          {"devices", std::move(devices)}};
}

}  // namespace hearth::serve
