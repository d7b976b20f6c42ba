#include "hearth/cluster/peer_limits.h"

#include <fmt/core.h>

#include <algorithm>

#include "hearth/base/error.h"

namespace hearth::cluster {

uint64_t inbox_rows_bound(const model::HParams& hp) {
  return std::clamp<uint64_t>(hp.ctx_train, 4096, 65536);
}

uint64_t data_message_bytes(uint32_t dim, uint64_t rows) {
  // round, next_layer, final, dim, n_segments, n_floats: well under 64 bytes.
  constexpr uint64_t kFields = 64;
  constexpr uint64_t kSegmentBytes = 12;
  return net::kHeaderBytes + kFields + rows * (kSegmentBytes + uint64_t{dim} * sizeof(float));
}

uint64_t kv_cache_bytes(const model::HParams& hp, uint64_t n_layers, uint64_t n_ctx) {
  constexpr uint64_t kF16 = 2;  // K and V are stored as f16
  return n_layers * n_ctx * uint64_t{hp.kv_dim()} * 2 * kF16;
}

void check_peer_endpoint(std::string_view field, const std::string& endpoint,
                         const std::string& own_endpoint) {
  const auto scheme_of = [](const std::string& e) { return e.substr(0, e.find("://") + 3); };
  if (endpoint.find("://") == std::string::npos || scheme_of(endpoint) != scheme_of(own_endpoint)) {
    throw UsageError(fmt::format("{} '{}' is not a {} address like this device's own", field,
                                 endpoint, scheme_of(own_endpoint)));
  }
  if (endpoint.rfind("tcp://", 0) != 0) return;
  const std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  const std::string host = colon == std::string::npos ? "" : rest.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
  const bool digits =
      !port.empty() && port.size() <= 5 &&
      std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
  const bool port_ok = digits && std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  const bool host_ok = !host.empty() && host != "*" && host != "0.0.0.0" &&
                       host.find_first_of(" ;\t\n") == std::string::npos;
  if (!host_ok || !port_ok) {
    throw UsageError(fmt::format(
        "{} '{}' is not tcp://HOST:PORT with a host and a port in 1..65535", field, endpoint));
  }
}

}  // namespace hearth::cluster
