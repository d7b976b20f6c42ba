// Finding the devices of a ring on the LAN (issue 17, docs/ring.md "Finding devices").
//
// A worker started with --announce sends a small UDP datagram to a multicast group every
// second: the wire protocol it speaks, the model it holds (net::ModelIdentity), its control
// address, its name and whether a head is using it. A head started with --workers auto listens
// on the group, keeps the announcements of devices holding its model, and uses their addresses
// as --workers; `hearth serve` keeps listening, so a device that appears later joins at an
// idle moment.
//
// Announcements carry an HMAC-SHA-256 tag keyed by a key derived from the cluster key's
// secret half, so only devices holding the cluster key can announce to a keyed head, and an
// announcement reveals neither key. Without keys (--insecure) they are unauthenticated, and a
// head then accepts only addresses on the host the datagram came from. Anyone on the LAN can
// still see that hearth workers exist, which model size they hold and their ports.
//
// Datagram (little-endian, at most kMaxAnnouncementBytes):
//   0  4  magic "HRTD"
//   4  1  format (1)
//   5  1  flags: bit 0 keyed, bit 1 busy (serving a head)
//   6  2  wire protocol version (net/wire.h)
//   8  8  model file size
//  16  8  model hash
//  24  1  E, length of the control address (1..kMaxEndpointBytes)
//  25  E  control address, "tcp://HOST:PORT"; HOST "0.0.0.0" or "*" = the sender's address
//      1  N, length of the device name (0..kMaxNameBytes)
//      N  device name, printable ASCII
//     16  tag: HMAC-SHA-256 of every byte before it, first 16 bytes (zeros when not keyed)
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hearth/net/curve.h"
#include "hearth/net/wire.h"

namespace hearth::net {

inline constexpr size_t kMaxAnnouncementBytes = 512;
inline constexpr size_t kMaxEndpointBytes = 200;
inline constexpr size_t kMaxNameBytes = 64;

struct Announcement {
  uint16_t protocol = kProtocolVersion;
  ModelIdentity model;
  std::string endpoint;  // as the worker listens
  std::string name;
  bool busy = false;
};

// The key that tags announcements: derived from the cluster key's secret (so it differs from
// every key used on links); empty when links are not keyed.
std::string discovery_key(const CurveConfig& curve);

// Throws UsageError when a field does not fit the format (endpoint or name too long).
std::vector<uint8_t> encode_announcement(const Announcement& a, const std::string& key);

// Throws FormatError naming what is wrong: size, magic, format, a field out of bounds, or a
// tag that does not match `key` (an unkeyed datagram is refused by a keyed receiver and the
// other way round).
Announcement decode_announcement(std::span<const uint8_t> datagram, const std::string& key);

// The control address to connect to: `endpoint` with a wildcard host replaced by `sender`
// (dotted IPv4). Throws FormatError when it is not tcp://HOST:PORT, or when `unkeyed` and
// HOST is neither a wildcard nor `sender` (an unauthenticated datagram must not send the head
// to another host).
std::string resolve_endpoint(const std::string& endpoint, const std::string& sender, bool unkeyed);

struct DiscoveryAddress {
  std::string group = "239.255.72.72";  // organisation-local multicast scope
  uint16_t port = 47219;
};

// "GROUP:PORT" or "GROUP" (default port); "" = the defaults. Throws UsageError naming the text.
DiscoveryAddress parse_discovery_address(const std::string& text);

// Sends `what()` every `interval_ms` until destroyed. A send that fails is logged once and
// retried; it never ends the process.
class Announcer {
 public:
  Announcer(DiscoveryAddress where, std::function<Announcement()> what, std::string key,
            int interval_ms = 1000);
  ~Announcer();
  Announcer(const Announcer&) = delete;
  Announcer& operator=(const Announcer&) = delete;
  uint64_t sent() const { return sent_; }

 private:
  void run();
  DiscoveryAddress where_;
  std::function<Announcement()> what_;
  std::string key_;
  int interval_ms_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

// A device found on the LAN.
struct FoundDevice {
  std::string address;  // control address to connect to
  std::string name;
  bool busy = false;
  double seen_ms = 0;  // clock.h now_ms() of the last announcement
};

// Listens on the group for announcements of devices holding `model` and speaking this wire
// protocol; the rest are counted and dropped. Keeps at most kMaxDevices addresses, forgetting
// those silent for longer than `forget_ms`. Throws IoError when it cannot listen.
class DiscoveryListener {
 public:
  static constexpr size_t kMaxDevices = 64;
  DiscoveryListener(DiscoveryAddress where, ModelIdentity model, std::string key,
                    double forget_ms = 5000);
  ~DiscoveryListener();
  DiscoveryListener(const DiscoveryListener&) = delete;
  DiscoveryListener& operator=(const DiscoveryListener&) = delete;

  std::vector<FoundDevice> devices() const;  // heard within forget_ms, ordered by address
  uint64_t rejected() const { return rejected_; }

 private:
  void run();
  DiscoveryAddress where_;
  ModelIdentity model_;
  std::string key_;
  double forget_ms_;
  int fd_ = -1;
  mutable std::mutex mu_;
  std::map<std::string, FoundDevice> found_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rejected_{0};
  std::thread thread_;
};

}  // namespace hearth::net
