// Constructors of the two transport implementations, used by transport.cpp. Internal to net/.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "hearth/net/transport.h"

namespace hearth::net::detail {

std::unique_ptr<Listener> zmq_listen(const std::string& endpoint, const TransportOptions& opts);
std::unique_ptr<Connection> zmq_connect(const std::string& endpoint, const TransportOptions& opts);
size_t zmq_wait_any(std::span<Receiver* const> receivers, Millis timeout);

std::unique_ptr<Listener> loop_listen(const std::string& endpoint, const TransportOptions& opts);
std::unique_ptr<Connection> loop_connect(const std::string& endpoint, const TransportOptions& opts);
size_t loop_wait_any(std::span<Receiver* const> receivers, Millis timeout);

}  // namespace hearth::net::detail
