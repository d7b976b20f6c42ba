// Message transport of the ring: a Listener bound at an address receives from many peers and
// can answer each; a Connection talks to one Listener. The same two interfaces serve the
// control plane (head connects to each worker's listener) and the data plane (each device
// connects to its successor's inbox listener and sends Activations straight to it).
//
// Two implementations behind the same factory functions, chosen by the endpoint scheme:
//   tcp://HOST:PORT  ZeroMQ ROUTER (listener) / DEALER (connection). Port 0 binds a free port;
//                    endpoint() reports the one chosen.
//   loop://NAME      in-process queues, so the distributed path runs in one test process.
//
// Guarantees:
// - Every receive has a timeout; waiting never hangs. recv() throws NetError naming the peer
//   and what was awaited when the time is up. A Connection also notices that its peer's
//   process died or closed (tcp: socket monitor; loop: listener destroyed) and throws
//   NetError at once instead of waiting out the timeout.
// - A message that fails to decode (bad magic/version/checksum, truncated, oversized, bad
//   fields) is dropped with a warning naming the sender and the reason; the receiver keeps
//   serving others. dropped() counts them. The socket also refuses frames larger than
//   TransportOptions::max_message_bytes before they are buffered (ZMQ_MAXMSGSIZE).
// - Sends block at most send_timeout_ms (peer not reachable or not draining), then NetError.
//
// Objects are not thread-safe: use each from one thread at a time (ZeroMQ sockets are not).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hearth/net/curve.h"
#include "hearth/net/wire.h"

namespace hearth::net {

struct TransportOptions {
  // Largest whole message (header + payload) accepted from the network.
  uint64_t max_message_bytes = kHeaderBytes + kMaxPayloadBytes;
  int send_timeout_ms = 5000;
  // How long unsent messages may delay closing (so a final Stop still goes out).
  int linger_ms = 500;
  // ZMTP heartbeats: a silent TCP peer is declared dead after heartbeat_timeout_ms. libzmq's
  // I/O thread answers them, so a device busy computing or reading for seconds stays alive;
  // a frozen or unplugged one is caught within about 2.5 s.
  int heartbeat_ms = 1000;
  int heartbeat_timeout_ms = 2500;
  // Optional CURVE encryption and authentication (tcp only); see curve.h.
  CurveConfig curve;
};

// Opaque identity of a peer of a Listener (ZeroMQ routing id, or loopback connection id).
using PeerId = std::string;

struct Incoming {
  PeerId from;
  std::string peer;  // human-readable sender ("tcp 127.0.0.1 #a1b2c3" / "loop conn 3")
  Envelope msg;
};

using Millis = std::chrono::milliseconds;

// Something that can be waited on with wait_any().
class Receiver {
 public:
  virtual ~Receiver() = default;
  virtual uint64_t dropped() const = 0;  // messages discarded as malformed
  // Implementation hooks for wait_any(); not for callers.
  virtual bool is_loopback() const = 0;
  virtual void* zmq_socket_handle() const { return nullptr; }
  virtual void* zmq_monitor_handle() const { return nullptr; }
  virtual bool loop_ready() const { return false; }
  // True once an established link to the peer broke (peer died or closed). Listeners serve
  // many peers and never report this.
  virtual bool peer_lost() { return false; }
};

class Listener : public Receiver {
 public:
  // The bound address with the port resolved ("tcp://127.0.0.1:41234", "loop://w1").
  virtual const std::string& endpoint() const = 0;
  // Next valid message, or nullopt when `timeout` passes first. Malformed messages are
  // dropped and logged while waiting.
  virtual std::optional<Incoming> recv_for(Millis timeout) = 0;
  // Like recv_for, but a timeout throws NetError("... waiting for <what> ...").
  Incoming recv(Millis timeout, std::string_view what);
  // Peer links that ended or were refused below the message layer (tcp: peer left, sent a
  // frame over max_message_bytes, failed the ZMTP or CURVE handshake; each is logged).
  // The loopback has no such links and reports 0.
  virtual uint64_t links_closed() { return 0; }
  // Answers a peer that has sent to this listener. Throws NetError if it is gone.
  virtual void send(const PeerId& to, const Message& m, uint64_t request_id = 0) = 0;
};

class Connection : public Receiver {
 public:
  virtual const std::string& peer() const = 0;  // the endpoint connected to
  virtual void send(const Message& m, uint64_t request_id = 0) = 0;
  // Sends bytes as one message without encoding them: for tests of hostile peers.
  virtual void send_raw(std::span<const uint8_t> bytes) = 0;
  // Next valid message or nullopt on timeout; throws NetError if the peer was lost.
  virtual std::optional<Envelope> recv_for(Millis timeout) = 0;
  // Like recv_for, but a timeout throws NetError naming the peer and `what`.
  Envelope recv(Millis timeout, std::string_view what);
};

std::unique_ptr<Listener> listen(const std::string& endpoint, const TransportOptions& opts = {});
std::unique_ptr<Connection> connect(const std::string& endpoint, const TransportOptions& opts = {});

// Waits until one of `receivers` has something to receive (or, for a Connection, has lost its
// peer); returns its index, or receivers.size() on timeout. All receivers must be of one kind
// (all tcp or all loop), else UsageError.
size_t wait_any(std::span<Receiver* const> receivers, Millis timeout);

// Decodes bytes from `peer`; on FormatError logs a warning naming the peer and the reason,
// bumps `dropped` and returns nullopt. Shared by both implementations.
std::optional<Envelope> decode_or_drop(std::span<const uint8_t> bytes, std::string_view peer,
                                       uint64_t& dropped);

}  // namespace hearth::net
