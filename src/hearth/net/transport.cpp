#include "hearth/net/transport.h"

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/net/transport_impl.h"

namespace hearth::net {

namespace {

constexpr uint64_t kDropsLoggedInFull = 20;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

Incoming Listener::recv(Millis timeout, std::string_view what) {
  auto got = recv_for(timeout);
  if (!got) {
    throw NetError(
        fmt::format("listener {}: no {} arrived within {} ms", endpoint(), what, timeout.count()));
  }
  return std::move(*got);
}

Envelope Connection::recv(Millis timeout, std::string_view what) {
  auto got = recv_for(timeout);
  if (!got) {
    throw NetError(fmt::format("peer {}: no {} arrived within {} ms (peer stalled or dead)", peer(),
                               what, timeout.count()));
  }
  return std::move(*got);
}

std::unique_ptr<Listener> listen(const std::string& endpoint, const TransportOptions& opts) {
  if (starts_with(endpoint, "tcp://")) return detail::zmq_listen(endpoint, opts);
  if (starts_with(endpoint, "loop://")) return detail::loop_listen(endpoint, opts);
  throw UsageError(fmt::format("listen address '{}' must start with tcp:// or loop://", endpoint));
}

std::unique_ptr<Connection> connect(const std::string& endpoint, const TransportOptions& opts) {
  if (starts_with(endpoint, "tcp://")) return detail::zmq_connect(endpoint, opts);
  if (starts_with(endpoint, "loop://")) return detail::loop_connect(endpoint, opts);
  throw UsageError(fmt::format("peer address '{}' must start with tcp:// or loop://", endpoint));
}

size_t wait_any(std::span<Receiver* const> receivers, Millis timeout) {
  if (receivers.empty()) throw UsageError("wait_any: nothing to wait on");
  const bool loop = receivers[0]->is_loopback();
  for (const Receiver* r : receivers) {
    if (r->is_loopback() != loop) throw UsageError("wait_any: cannot mix tcp and loop receivers");
  }
  return loop ? detail::loop_wait_any(receivers, timeout)
              : detail::zmq_wait_any(receivers, timeout);
}

std::optional<Envelope> decode_or_drop(std::span<const uint8_t> bytes, std::string_view peer,
                                       uint64_t& dropped) {
  try {
    return decode(bytes, peer);
  } catch (const FormatError& e) {
    ++dropped;
    // A peer flooding garbage must not flood the log too: the first drops are all logged,
    // later ones every 1000th, with the running count.
    if (dropped <= kDropsLoggedInFull || dropped % 1000 == 0) {
      log::warn("dropped a {}-byte message ({} dropped so far): {}", bytes.size(), dropped,
                e.what());
    }
    return std::nullopt;
  }
}

}  // namespace hearth::net
