#include "hearth/cluster/endpoints.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "hearth/base/error.h"

namespace hearth::cluster {
namespace {

constexpr std::string_view kTcp = "tcp://";

// Splits "tcp://HOST:PORT" at the last colon; false for other schemes.
bool split_tcp(const std::string& endpoint, std::string& host, std::string& port) {
  if (endpoint.rfind(kTcp, 0) != 0) return false;
  const std::string rest = endpoint.substr(kTcp.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return false;
  host = rest.substr(0, colon);
  port = rest.substr(colon + 1);
  return true;
}

}  // namespace

std::string endpoint_host(const std::string& endpoint) {
  std::string host, port;
  return split_tcp(endpoint, host, port) ? host : std::string();
}

std::string inbox_bind_address(const std::string& control) {
  std::string host, port;
  if (split_tcp(control, host, port)) return std::string(kTcp) + host + ":0";
  return control + "-data";
}

std::string with_reachable_host(const std::string& endpoint, const std::string& host) {
  std::string h, port;
  if (!split_tcp(endpoint, h, port)) return endpoint;
  if (h == "0.0.0.0" || h == "*" || h.empty()) return std::string(kTcp) + host + ":" + port;
  return endpoint;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1" || host == "[::1]";
}

std::string local_address_towards(const std::string& host) {
  if (host.empty() || is_loopback_host(host)) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || res == nullptr) return "127.0.0.1";
  std::string out = "127.0.0.1";
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0) {
    // A UDP connect sends nothing; it only asks the kernel which source address it would use.
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      sockaddr_in local{};
      socklen_t len = sizeof local;
      char buf[INET_ADDRSTRLEN] = {};
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
          inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf) != nullptr) {
        out = buf;
      }
    }
    ::close(fd);
  }
  freeaddrinfo(res);
  return out;
}

void check_peer_endpoint(std::string_view field, const std::string& endpoint,
                         const std::string& own_endpoint) {
  const auto scheme_of = [](const std::string& e) { return e.substr(0, e.find("://") + 3); };
  if (endpoint.find("://") == std::string::npos || scheme_of(endpoint) != scheme_of(own_endpoint)) {
    throw UsageError(fmt::format("{} '{}' is not a {} address like this device's own", field,
                                 endpoint, scheme_of(own_endpoint)));
  }
  std::string host, port;
  if (!split_tcp(endpoint, host, port)) return;  // loop://: any name
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
