#include "hearth/net/discovery.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "hearth/base/clock.h"
#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/base/sha256.h"

#ifndef _WIN32
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#endif

namespace hearth::net {
namespace {

constexpr uint8_t kAnnounceMagic[4] = {'H', 'R', 'T', 'D'};
constexpr uint8_t kFormat = 1;
constexpr uint8_t kFlagKeyed = 1u << 0;
constexpr uint8_t kFlagBusy = 1u << 1;
constexpr size_t kTagBytes = 16;
constexpr size_t kFixedBytes = 25;  // up to and including the endpoint length

void put_le(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

bool printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

std::array<uint8_t, kTagBytes> tag_of(std::span<const uint8_t> body, const std::string& key) {
  std::array<uint8_t, kTagBytes> tag{};
  if (key.empty()) return tag;
  const auto mac = hmac_sha256(as_bytes(key), body);
  std::copy_n(mac.begin(), kTagBytes, tag.begin());
  return tag;
}

}  // namespace

std::string discovery_key(const CurveConfig& curve) {
  if (!curve.enabled()) return {};
  const auto d = sha256(as_bytes("hearth LAN discovery, format 1: " + curve.secret_key));
  return std::string(d.begin(), d.end());
}

std::vector<uint8_t> encode_announcement(const Announcement& a, const std::string& key) {
  if (a.endpoint.empty() || a.endpoint.size() > kMaxEndpointBytes || !printable(a.endpoint))
    throw UsageError(
        fmt::format("announcement: control address '{}' must be 1-{} printable "
                    "characters",
                    a.endpoint, kMaxEndpointBytes));
  // A long or odd device name is shortened and cleaned rather than refused: it is a label.
  std::string name = a.name.substr(0, kMaxNameBytes);
  for (char& c : name)
    if (c < 0x20 || c >= 0x7f) c = '?';
  std::vector<uint8_t> out(kAnnounceMagic, kAnnounceMagic + 4);
  out.push_back(kFormat);
  out.push_back(static_cast<uint8_t>((key.empty() ? 0 : kFlagKeyed) | (a.busy ? kFlagBusy : 0)));
  put_le(out, a.protocol, 2);
  put_le(out, a.model.file_size, 8);
  put_le(out, a.model.hash, 8);
  out.push_back(static_cast<uint8_t>(a.endpoint.size()));
  out.insert(out.end(), a.endpoint.begin(), a.endpoint.end());
  out.push_back(static_cast<uint8_t>(name.size()));
  out.insert(out.end(), name.begin(), name.end());
  const auto tag = tag_of(out, key);
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

Announcement decode_announcement(std::span<const uint8_t> d, const std::string& key) {
  if (d.size() < kFixedBytes + 1 + 1 + kTagBytes || d.size() > kMaxAnnouncementBytes)
    throw FormatError(fmt::format("announcement: {} bytes, not a size it can have", d.size()));
  if (std::memcmp(d.data(), kAnnounceMagic, 4) != 0)
    throw FormatError("announcement: no hearth magic");
  if (d[4] != kFormat) throw FormatError(fmt::format("announcement: format {}, not 1", d[4]));
  const uint8_t flags = d[5];
  if ((flags & ~(kFlagKeyed | kFlagBusy)) != 0)
    throw FormatError(fmt::format("announcement: unknown flags {:#x}", flags));
  Announcement a;
  a.protocol = static_cast<uint16_t>(get_le(&d[6], 2));
  a.model.file_size = get_le(&d[8], 8);
  a.model.hash = get_le(&d[16], 8);
  size_t at = kFixedBytes - 1;
  const size_t e = d[at++];
  if (e == 0 || e > kMaxEndpointBytes || at + e + 1 + kTagBytes > d.size())
    throw FormatError(fmt::format("announcement: control address of {} bytes", e));
  a.endpoint.assign(reinterpret_cast<const char*>(&d[at]), e);
  at += e;
  const size_t n = d[at++];
  if (n > kMaxNameBytes || at + n + kTagBytes != d.size())
    throw FormatError(
        fmt::format("announcement: device name of {} bytes in {} bytes", n, d.size()));
  a.name.assign(reinterpret_cast<const char*>(&d[at]), n);
  at += n;
  if (!printable(a.endpoint) || !printable(a.name))
    throw FormatError("announcement: address or name is not printable text");
  const bool keyed = (flags & kFlagKeyed) != 0;
  if (keyed != !key.empty()) {
    throw FormatError(keyed ? "announcement: keyed, but this device runs --insecure"
                            : "announcement: not keyed (a worker running --insecure)");
  }
  const auto want = tag_of(d.subspan(0, at), key);
  uint8_t diff = 0;  // every byte compared, whatever the first difference
  for (size_t i = 0; i < kTagBytes; ++i) diff |= static_cast<uint8_t>(want[i] ^ d[at + i]);
  if (diff != 0) throw FormatError("announcement: tag does not match this cluster key");
  a.busy = (flags & kFlagBusy) != 0;
  return a;
}

std::string resolve_endpoint(const std::string& endpoint, const std::string& sender, bool unkeyed) {
  const std::string_view scheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind(scheme, 0) != 0 || colon == std::string::npos || colon < scheme.size())
    throw FormatError(fmt::format("announced address '{}' is not tcp://HOST:PORT", endpoint));
  const std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  const std::string port_text = endpoint.substr(colon + 1);
  int port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port < 1 || port > 65535 ||
      host.empty()) {
    throw FormatError(fmt::format("announced address '{}' is not tcp://HOST:PORT", endpoint));
  }
  if (host == "0.0.0.0" || host == "*") return fmt::format("tcp://{}:{}", sender, port);
  if (unkeyed && host != sender) {
    throw FormatError(
        fmt::format("unauthenticated announcement from {} names another host ({})", sender, host));
  }
  return endpoint;
}

DiscoveryAddress parse_discovery_address(const std::string& text) {
  DiscoveryAddress a;
  if (text.empty()) return a;
  const auto colon = text.rfind(':');
  a.group = text.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string p = text.substr(colon + 1);
    int port = 0;
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc{} || end != p.data() + p.size() || port < 1 || port > 65535)
      throw UsageError(fmt::format("--discovery '{}': port must be 1-65535", text));
    a.port = static_cast<uint16_t>(port);
  }
#ifndef _WIN32
  in_addr ip{};
  if (inet_pton(AF_INET, a.group.c_str(), &ip) != 1)
    throw UsageError(fmt::format("--discovery '{}': '{}' is not an IPv4 address", text, a.group));
#endif
  return a;
}

#ifdef _WIN32

Announcer::Announcer(DiscoveryAddress, std::function<Announcement()>, std::string, int) {
  throw UsageError(
      "LAN discovery is not available on Windows yet: give the head --workers "
      "with addresses");
}
Announcer::~Announcer() = default;
void Announcer::run() {}
DiscoveryListener::DiscoveryListener(DiscoveryAddress, ModelIdentity, std::string, double) {
  throw UsageError("LAN discovery is not available on Windows yet: give --workers addresses");
}
DiscoveryListener::~DiscoveryListener() = default;
void DiscoveryListener::run() {}
std::vector<FoundDevice> DiscoveryListener::devices() const {
  return {};
}

#else

namespace {

sockaddr_in group_address(const DiscoveryAddress& a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(a.port);
  inet_pton(AF_INET, a.group.c_str(), &sa.sin_addr);
  return sa;
}

bool is_multicast(const DiscoveryAddress& a) {
  return (ntohl(group_address(a).sin_addr.s_addr) >> 28) == 0xE;
}

// A UDP socket; an IoError naming `who` (the announcer or the listener) when there is none.
int open_udp_socket(std::string_view who) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open a UDP socket: {}", who, strerror(errno)));
  return fd;
}

// Tells the thread that uses the socket to stop, waits for it, then closes the socket.
void stop_and_close(std::atomic<bool>& stop, std::thread& thread, int fd) {
  stop = true;
  if (thread.joinable()) thread.join();
  if (fd >= 0) ::close(fd);
}

}  // namespace

Announcer::Announcer(DiscoveryAddress where, std::function<Announcement()> what, std::string key,
                     int interval_ms)
    : where_(std::move(where)),
      what_(std::move(what)),
      key_(std::move(key)),
      interval_ms_(interval_ms) {
  encode_announcement(what_(), key_);  // a field that does not fit fails now, not in the thread
  fd_ = open_udp_socket("announce");
  const int ttl = 1;   // one LAN segment: routers do not forward it
  const int loop = 1;  // devices on this host hear it too
  setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
  setsockopt(fd_, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
  thread_ = std::thread([this] { run(); });
}

Announcer::~Announcer() {
  stop_and_close(stop_, thread_, fd_);
}

void Announcer::run() {
  const sockaddr_in to = group_address(where_);
  bool warned = false;
  while (!stop_) {
    try {
      const auto bytes = encode_announcement(what_(), key_);
      if (::sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                   sizeof to) == static_cast<ssize_t>(bytes.size())) {
        ++sent_;
        warned = false;
      } else if (!warned) {
        log::warn("announce: cannot send to {}:{}: {} (retrying every {} ms)", where_.group,
                  where_.port, strerror(errno), interval_ms_);
        warned = true;
      }
    } catch (const std::exception& e) {
      if (!warned) log::warn("announce: {}", e.what());
      warned = true;
    }
    for (int waited = 0; waited < interval_ms_ && !stop_; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

DiscoveryListener::DiscoveryListener(DiscoveryAddress where, ModelIdentity model, std::string key,
                                     double forget_ms)
    : where_(std::move(where)), model_(model), key_(std::move(key)), forget_ms_(forget_ms) {
  fd_ = open_udp_socket("discovery");
  const int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // several heads on one host
#ifdef SO_REUSEPORT
  setsockopt(fd_, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
#endif
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(where_.port);
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0) {
    const int err = errno;
    ::close(fd_);
    throw IoError(
        fmt::format("discovery: cannot listen on UDP port {}: {}", where_.port, strerror(err)));
  }
  if (is_multicast(where_)) {
    ip_mreq m{};
    m.imr_multiaddr = group_address(where_).sin_addr;
    m.imr_interface.s_addr = htonl(INADDR_ANY);
    if (setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) {
      const int err = errno;
      ::close(fd_);
      throw IoError(fmt::format("discovery: cannot join multicast group {}: {}", where_.group,
                                strerror(err)));
    }
  }
  timeval tv{0, 100 * 1000};  // wake up to notice stop_
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  thread_ = std::thread([this] { run(); });
}

DiscoveryListener::~DiscoveryListener() {
  stop_and_close(stop_, thread_, fd_);
}

void DiscoveryListener::run() {
  uint8_t buf[kMaxAnnouncementBytes + 1];
  while (!stop_) {
    sockaddr_in from{};
    socklen_t from_len = sizeof from;
    const ssize_t n =
        ::recvfrom(fd_, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) continue;  // timeout (or a signal): look at stop_ again
    char sender[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &from.sin_addr, sender, sizeof sender);
    try {
      const Announcement a = decode_announcement({buf, static_cast<size_t>(n)}, key_);
      if (a.protocol != kProtocolVersion || !(a.model == model_)) {
        ++rejected_;  // another version or model: not a device for this ring
        continue;
      }
      FoundDevice d;
      d.address = resolve_endpoint(a.endpoint, sender, key_.empty());
      d.name = a.name;
      d.busy = a.busy;
      d.seen_ms = now_ms();
      std::lock_guard lock(mu_);
      for (auto it = found_.begin(); it != found_.end();) {
        it = d.seen_ms - it->second.seen_ms > forget_ms_ ? found_.erase(it) : std::next(it);
      }
      if (found_.size() >= kMaxDevices && found_.count(d.address) == 0) {
        ++rejected_;
        continue;
      }
      found_[d.address] = std::move(d);
    } catch (const Error&) {
      ++rejected_;  // a stranger's datagram, or another cluster's: dropped
    }
  }
}

std::vector<FoundDevice> DiscoveryListener::devices() const {
  const double now = now_ms();
  std::lock_guard lock(mu_);
  std::vector<FoundDevice> out;
  for (const auto& [addr, d] : found_) {
    if (now - d.seen_ms <= forget_ms_) out.push_back(d);
  }
  return out;
}

#endif

}  // namespace hearth::net
