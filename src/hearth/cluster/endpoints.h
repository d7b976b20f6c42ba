// Address helpers of the ring: where a device binds its data inbox and which address it
// announces, since a socket bound to 0.0.0.0 cannot be connected to under that name.
#pragma once

#include <string>
#include <string_view>

namespace hearth::cluster {

// Host part of "tcp://HOST:PORT" ("" for other schemes).
std::string endpoint_host(const std::string& endpoint);

// Where a device listening for control at `control` binds its data inbox: the same host
// with a free port (tcp), or "<control>-data" (loop).
std::string inbox_bind_address(const std::string& control);

// Replaces a wildcard host ("0.0.0.0", "*", "") of a tcp endpoint with `host`; others unchanged.
std::string with_reachable_host(const std::string& endpoint, const std::string& host);

// The local IP address this machine uses to reach `host` (routing table lookup through an
// unsent UDP connect); "127.0.0.1" for loopback hosts or when the lookup fails.
std::string local_address_towards(const std::string& host);

bool is_loopback_host(const std::string& host);

// Checks an endpoint a peer asks this device to connect to: the scheme of this device's own
// listener (`own_endpoint`: tcp:// or loop://), and for tcp a host (not a wildcard) and a port
// in 1..65535. Throws UsageError naming `field`.
void check_peer_endpoint(std::string_view field, const std::string& endpoint,
                         const std::string& own_endpoint);

}  // namespace hearth::cluster
