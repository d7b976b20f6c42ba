// A user-space TCP relay that makes a loopback or LAN link behave like a slower one (Wi-Fi):
// it accepts connections on a listen address, opens one to the target for each, and forwards
// bytes both ways, holding every chunk for a fixed one-way delay and then releasing it at no
// more than a capped rate (token bucket). Used by the cluster emulation harness
// (bench/cluster/), because tc netem is not available there.
//
// Model: a chunk read at time t is written no earlier than t + delay_ms, and the bytes of one
// direction leave at rate_bytes_per_s on average with bursts up to burst_bytes, so a round
// trip gains 2 * delay_ms plus serialisation time. The rate cap is shared by all connections
// of the relay (one bucket per direction), like one radio link per device.
// Non-goals: jitter, loss, reordering (TCP hides those from the ring anyway).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace hearth::net {

struct RelayOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0: a free port, see DelayRelay::port()
  std::string target_host = "127.0.0.1";
  uint16_t target_port = 0;
  double delay_ms = 0;          // added one way, in each direction
  double rate_bytes_per_s = 0;  // per direction, shared by all connections; 0 = unlimited
  size_t burst_bytes = 64 * 1024;
  // Bytes held per direction of a connection before the relay stops reading from the
  // sender (TCP back-pressure then slows the sender, as a real link would).
  size_t max_buffered_bytes = 64u << 20;
  // Transparent mode (the cluster harness, bench/cluster/): connections arrive through a NAT
  // redirect rule and are forwarded to their original destination (SO_ORIGINAL_DST), so one
  // relay shapes every link a device opens; target_host/target_port are then unused.
  bool transparent = false;
  // SO_MARK on the relay's own outgoing connections (needs CAP_NET_ADMIN), so the redirect
  // rule can exempt them instead of looping them back into the relay; 0 = none.
  uint32_t mark = 0;
};

struct RelayStats {
  uint64_t connections = 0;
  uint64_t bytes_forwarded = 0;  // both directions
};

class DelayRelay {
 public:
  // Binds the listen address and starts serving on background threads. Throws IoError if the
  // address cannot be bound or the host names do not resolve; UsageError on bad options.
  explicit DelayRelay(RelayOptions opts);
  ~DelayRelay();  // stops and joins everything
  DelayRelay(const DelayRelay&) = delete;
  DelayRelay& operator=(const DelayRelay&) = delete;

  uint16_t port() const;
  std::string endpoint() const;  // "tcp://LISTEN_HOST:PORT", for transport connect()
  RelayStats stats() const;
  // Closes the listener and every relayed connection. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hearth::net
