// ZeroMQ implementation of transport.h: ROUTER listeners, DEALER connections, over tcp.
#include <zmq.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/net/transport_impl.h"

namespace hearth::net::detail {

namespace {

using Clock = std::chrono::steady_clock;

// One context for the process, never terminated: zmq_ctx_term blocks on any socket still
// open, and a library must not hang its host at exit. It stays reachable, so it is not a leak.
void* context() {
  static void* const ctx = [] {
    void* c = zmq_ctx_new();
    if (c == nullptr) throw IoError("zmq_ctx_new failed");
    return c;
  }();
  return ctx;
}

std::string zerr() {
  return zmq_strerror(zmq_errno());
}

// Owns one zmq socket.
class Socket {
 public:
  explicit Socket(int type) : s_(zmq_socket(context(), type)) {
    if (s_ == nullptr) throw IoError(fmt::format("zmq_socket: {}", zerr()));
  }
  ~Socket() {
    if (s_ != nullptr) zmq_close(s_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  void* get() const { return s_; }

  void set_int(int option, int value, const char* name) {
    if (zmq_setsockopt(s_, option, &value, sizeof value) != 0) {
      throw IoError(fmt::format("zmq_setsockopt {}={}: {}", name, value, zerr()));
    }
  }
  void set_i64(int option, int64_t value, const char* name) {
    if (zmq_setsockopt(s_, option, &value, sizeof value) != 0) {
      throw IoError(fmt::format("zmq_setsockopt {}={}: {}", name, value, zerr()));
    }
  }
  void set_str(int option, const std::string& value, const char* name) {
    if (zmq_setsockopt(s_, option, value.data(), value.size()) != 0) {
      throw UsageError(fmt::format("zmq_setsockopt {}: {}", name, zerr()));
    }
  }

 private:
  void* s_;
};

// Owns one zmq message (frame).
struct Frame {
  zmq_msg_t m;
  Frame() { zmq_msg_init(&m); }
  ~Frame() { zmq_msg_close(&m); }
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  std::span<const uint8_t> bytes() {
    return {static_cast<const uint8_t*>(zmq_msg_data(&m)), zmq_msg_size(&m)};
  }
};

void apply_common(Socket& s, const TransportOptions& o) {
  s.set_int(ZMQ_LINGER, o.linger_ms, "ZMQ_LINGER");
  s.set_int(ZMQ_SNDTIMEO, o.send_timeout_ms, "ZMQ_SNDTIMEO");
  // Frames larger than this are refused by libzmq before being buffered, and the offending
  // connection is closed: a peer cannot make us allocate more than one message's worth.
  s.set_i64(ZMQ_MAXMSGSIZE, static_cast<int64_t>(o.max_message_bytes), "ZMQ_MAXMSGSIZE");
  if (o.heartbeat_ms > 0) {
    s.set_int(ZMQ_HEARTBEAT_IVL, o.heartbeat_ms, "ZMQ_HEARTBEAT_IVL");
    s.set_int(ZMQ_HEARTBEAT_TIMEOUT, o.heartbeat_timeout_ms, "ZMQ_HEARTBEAT_TIMEOUT");
    s.set_int(ZMQ_HEARTBEAT_TTL, o.heartbeat_timeout_ms, "ZMQ_HEARTBEAT_TTL");
  }
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Polls `items`; returns the number ready, retrying on EINTR.
int poll_items(zmq_pollitem_t* items, int n, int timeout_ms) {
  for (;;) {
    const int rc = zmq_poll(items, n, timeout_ms);
    if (rc >= 0) return rc;
    if (zmq_errno() != EINTR) throw NetError(fmt::format("zmq_poll: {}", zerr()));
  }
}

// Receives every frame of one message without blocking (all frames of a message arrive
// together). Keeps at most `keep` frames; extra frames are read and discarded so a peer
// cannot pile them up. Returns the total frame count.
size_t recv_message(void* sock, std::vector<std::unique_ptr<Frame>>& frames, size_t keep) {
  frames.clear();
  size_t count = 0;
  for (;;) {
    auto f = std::make_unique<Frame>();
    if (zmq_msg_recv(&f->m, sock, ZMQ_DONTWAIT) < 0) {
      if (zmq_errno() == EAGAIN && count == 0) return 0;
      throw NetError(fmt::format("zmq_msg_recv: {}", zerr()));
    }
    ++count;
    const bool more = zmq_msg_more(&f->m) != 0;
    if (frames.size() < keep) frames.push_back(std::move(f));
    if (!more) return count;
  }
}

// Sends `bytes` as one frame without copying them: libzmq takes ownership and frees the
// buffer once written (a prefill chunk can be tens of MB). Returns zmq_msg_send's result.
int send_owned(void* sock, std::vector<uint8_t> bytes, int flags) {
  if (bytes.empty()) return zmq_send(sock, nullptr, 0, flags);
  auto* owned = new std::vector<uint8_t>(std::move(bytes));
  zmq_msg_t msg;
  const auto release = [](void*, void* hint) { delete static_cast<std::vector<uint8_t>*>(hint); };
  if (zmq_msg_init_data(&msg, owned->data(), owned->size(), release, owned) != 0) {
    delete owned;
    return -1;
  }
  const int rc = zmq_msg_send(&msg, sock, flags);
  if (rc < 0) {
    const int err = zmq_errno();
    zmq_msg_close(&msg);  // still ours after a failed send; frees the buffer
    errno = err;
  }
  return rc;
}

std::string hex(std::span<const uint8_t> bytes) {
  std::string s;
  for (uint8_t b : bytes) s += fmt::format("{:02x}", b);
  return s;
}

std::atomic<uint64_t> g_monitor_seq{0};

// Socket monitor: libzmq reports link events of `sock` on an inproc PAIR socket.
class Monitor {
 public:
  Monitor(void* sock, int events) : pair_(ZMQ_PAIR), sock_(sock) {
    const std::string addr = fmt::format("inproc://hearth-monitor-{}", g_monitor_seq++);
    if (zmq_socket_monitor(sock, addr.c_str(), events) != 0) {
      throw IoError(fmt::format("zmq_socket_monitor: {}", zerr()));
    }
    pair_.set_int(ZMQ_LINGER, 0, "ZMQ_LINGER");
    if (::zmq_connect(pair_.get(), addr.c_str()) != 0) {
      throw IoError(fmt::format("connect monitor: {}", zerr()));
    }
  }
  ~Monitor() { zmq_socket_monitor(sock_, nullptr, 0); }
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;
  void* handle() const { return pair_.get(); }

  // Calls on_event(event, value) for every pending event, without blocking. An event is two
  // frames: [u16 event, u32 value] (native byte order, same process) and the endpoint.
  template <typename F>
  void pump(F&& on_event) {
    for (;;) {
      std::vector<std::unique_ptr<Frame>> frames;
      if (recv_message(pair_.get(), frames, 2) == 0) return;
      if (frames.empty() || zmq_msg_size(&frames[0]->m) < 6) continue;
      uint16_t event = 0;
      uint32_t value = 0;
      std::memcpy(&event, zmq_msg_data(&frames[0]->m), sizeof event);
      std::memcpy(&value, static_cast<const uint8_t*>(zmq_msg_data(&frames[0]->m)) + 2,
                  sizeof value);
      on_event(event, value);
    }
  }

 private:
  Socket pair_;
  void* sock_;
};

// "tcp://host:0" binds an ephemeral port; libzmq spells that "tcp://host:*".
std::string bind_address(const std::string& endpoint) {
  if (endpoint.size() > 2 && endpoint.compare(endpoint.size() - 2, 2, ":0") == 0) {
    return endpoint.substr(0, endpoint.size() - 1) + "*";
  }
  return endpoint;
}

// ZAP (ZeroMQ RFC 27): with a handler bound at inproc://zeromq.zap.01 in its context, libzmq
// asks it whether to accept each CURVE client of a server socket, passing the socket's ZAP
// domain and the client's proven public key. Listeners that accept one client key put it in
// their domain ("hearth-key:<z85>"), so the handler is stateless: it accepts a client whose
// key is the one its domain names, and any CURVE client of a socket without such a domain.
// One handler per process (one context), started with the first listener that needs it, on
// its own thread; it lives as long as the context (never terminated, see context()).
constexpr std::string_view kZapDomainPrefix = "hearth-key:";

std::string frame_text(Frame& f) {
  const auto b = f.bytes();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

// Answers one request; false when the socket failed (the handler then stops).
bool answer_zap_request(void* rep) {
  std::vector<std::string> parts;
  for (;;) {
    Frame f;
    if (zmq_msg_recv(&f.m, rep, 0) < 0) {
      if (zmq_errno() == EINTR) continue;
      return false;
    }
    if (parts.size() < 16) parts.push_back(frame_text(f));  // a request has 7 frames
    if (zmq_msg_more(&f.m) == 0) break;
  }
  // version, request id, domain, address, routing id, mechanism, credentials...
  const bool well_formed = parts.size() >= 6 && parts[0] == "1.0";
  std::string status = "400", text = "refused";
  if (well_formed && parts[5] == "CURVE" && parts.size() >= 7 && parts[6].size() == 32) {
    const std::string& domain = parts[2];
    if (domain.rfind(kZapDomainPrefix, 0) != 0) {
      status = "200", text = "OK";  // the socket accepts any CURVE client
    } else {
      char z85[41] = {};
      if (zmq_z85_encode(z85, reinterpret_cast<const uint8_t*>(parts[6].data()), 32) != nullptr &&
          domain.substr(kZapDomainPrefix.size()) == z85) {
        status = "200", text = "OK";
      } else {
        text = "client key is not the cluster key";
      }
    }
  } else if (well_formed && parts[5] != "CURVE") {
    status = "200", text = "OK";  // NULL and PLAIN sockets are not ours to judge
  } else if (!well_formed) {
    status = "500", text = "malformed ZAP request";
  }
  const std::string reply[] = {"1.0", parts.size() > 1 ? parts[1] : "", status, text, "", ""};
  for (size_t i = 0; i < std::size(reply); ++i) {
    const int flags = i + 1 < std::size(reply) ? ZMQ_SNDMORE : 0;
    while (zmq_send(rep, reply[i].data(), reply[i].size(), flags) < 0) {
      if (zmq_errno() != EINTR) return false;
    }
  }
  return true;
}

void ensure_zap_handler() {
  static const bool started = [] {
    void* rep = zmq_socket(context(), ZMQ_REP);
    if (rep == nullptr) throw IoError(fmt::format("ZAP handler: zmq_socket: {}", zerr()));
    // Bound before any listener exists, so no handshake can come before it.
    if (zmq_bind(rep, "inproc://zeromq.zap.01") != 0) {
      const std::string why = zerr();
      zmq_close(rep);
      throw IoError(fmt::format("ZAP handler: cannot bind inproc://zeromq.zap.01: {}", why));
    }
    std::thread([rep] {
      while (answer_zap_request(rep)) {
      }
      log::warn("ZAP handler stopped: {}; new CURVE clients will be refused", zerr());
      zmq_close(rep);
    }).detach();
    return true;
  }();
  (void)started;
}

void apply_curve_server(Socket& s, const CurveConfig& c) {
  if (!c.enabled()) return;
  s.set_int(ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER");
  s.set_str(ZMQ_CURVE_SECRETKEY, c.secret_key, "ZMQ_CURVE_SECRETKEY");
  if (!c.client_public_key.empty()) {
    ensure_zap_handler();
    s.set_str(ZMQ_ZAP_DOMAIN, std::string(kZapDomainPrefix) + c.client_public_key,
              "ZMQ_ZAP_DOMAIN");
  }
}

void apply_curve_client(Socket& s, const CurveConfig& c) {
  if (!c.enabled()) return;
  s.set_str(ZMQ_CURVE_SERVERKEY, c.server_public_key, "ZMQ_CURVE_SERVERKEY");
  s.set_str(ZMQ_CURVE_PUBLICKEY, c.public_key, "ZMQ_CURVE_PUBLICKEY");
  s.set_str(ZMQ_CURVE_SECRETKEY, c.secret_key, "ZMQ_CURVE_SECRETKEY");
}

class ZmqListener final : public Listener {
 public:
  ZmqListener(const std::string& endpoint, const TransportOptions& opts)
      : sock_(ZMQ_ROUTER), max_message_bytes_(opts.max_message_bytes) {
    apply_common(sock_, opts);
    // Sending to a peer that is gone fails loudly instead of being silently discarded.
    sock_.set_int(ZMQ_ROUTER_MANDATORY, 1, "ZMQ_ROUTER_MANDATORY");
    apply_curve_server(sock_, opts.curve);
    if (zmq_bind(sock_.get(), bind_address(endpoint).c_str()) != 0) {
      throw NetError(fmt::format("cannot listen on {}: {}", endpoint, zerr()));
    }
    char buf[256] = {};
    size_t len = sizeof buf;
    if (zmq_getsockopt(sock_.get(), ZMQ_LAST_ENDPOINT, buf, &len) != 0) {
      throw NetError(fmt::format("listener {}: ZMQ_LAST_ENDPOINT: {}", endpoint, zerr()));
    }
    endpoint_ = buf;
  }

  const std::string& endpoint() const override { return endpoint_; }
  uint64_t dropped() const override { return dropped_; }
  uint64_t links_closed() override {
    pump_monitor();
    return links_closed_;
  }
  bool is_loopback() const override { return false; }
  void* zmq_socket_handle() const override { return sock_.get(); }

  std::optional<Incoming> recv_for(Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      pump_monitor();
      zmq_pollitem_t item{sock_.get(), 0, ZMQ_POLLIN, 0};
      if (poll_items(&item, 1, remaining_ms(deadline)) == 0) {
        pump_monitor();
        return std::nullopt;
      }
      std::vector<std::unique_ptr<Frame>> frames;
      const size_t n = recv_message(sock_.get(), frames, 2);
      if (n == 0) continue;
      const std::string label = peer_label(frames);
      if (n != 2) {
        ++dropped_;
        log::warn("dropped a message from {} on {}: {} frames, expected 1", label, endpoint_,
                  n - 1);
        continue;
      }
      auto env = decode_or_drop(frames[1]->bytes(), label, dropped_);
      if (!env) continue;
      const auto id = frames[0]->bytes();
      return Incoming{PeerId(id.begin(), id.end()), label, std::move(*env)};
    }
  }

  void send(const PeerId& to, const Message& m, uint64_t request_id) override {
    if (zmq_send(sock_.get(), to.data(), to.size(), ZMQ_SNDMORE) < 0 ||
        send_owned(sock_.get(), encode(m, request_id), 0) < 0) {
      const int err = zmq_errno();
      throw NetError(fmt::format("listener {}: cannot send {} to peer #{}: {}", endpoint_,
                                 msg_type_name(type_of(m)),
                                 hex({reinterpret_cast<const uint8_t*>(to.data()), to.size()}),
                                 err == EHOSTUNREACH ? "peer is gone"
                                 : err == EAGAIN     ? "timed out"
                                                     : zmq_strerror(err)));
    }
  }

 private:
  std::string peer_label(std::vector<std::unique_ptr<Frame>>& frames) {
    std::string addr = "?";
    if (frames.size() > 1) {
      if (const char* a = zmq_msg_gets(&frames[1]->m, "Peer-Address")) addr = a;
    }
    return fmt::format("tcp {} #{} (on {})", addr, hex(frames[0]->bytes()), endpoint_);
  }

  // Logs links that libzmq closed or refused: peers that do not speak ZMTP, fail CURVE, or
  // send a frame over ZMQ_MAXMSGSIZE never reach recv_for(), so this is where they show up.
  void pump_monitor() {
    monitor_.pump([this](uint16_t event, uint32_t value) {
      ++links_closed_;
      // A misconfigured peer retries every 100 ms: log the first ones, then every 1000th.
      if (links_closed_ > 20 && links_closed_ % 1000 != 0) return;
      if (event == ZMQ_EVENT_DISCONNECTED) {
        log::info(
            "listener {}: a peer link closed (peer left, or sent a frame over {} bytes "
            "or a malformed one)",
            endpoint_, max_message_bytes_);
      } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        log::warn("listener {}: refused a peer: CURVE authentication failed (status {})", endpoint_,
                  value);
      } else {
        log::warn(
            "listener {}: refused a peer that does not speak ZMTP as configured "
            "(handshake error 0x{:x})",
            endpoint_, value);
      }
    });
  }

  Socket sock_;
  Monitor monitor_{sock_.get(), ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH};
  std::string endpoint_;
  uint64_t max_message_bytes_ = 0;
  uint64_t dropped_ = 0;
  uint64_t links_closed_ = 0;
};

class ZmqConnection final : public Connection {
 public:
  ZmqConnection(const std::string& endpoint, const TransportOptions& opts)
      : sock_(ZMQ_DEALER), peer_(endpoint), opts_(opts) {
    apply_common(sock_, opts);
    // Queue messages only on a completed connection: a send to a peer that is not up
    // then times out (send_timeout_ms) instead of waiting in a buffer forever.
    sock_.set_int(ZMQ_IMMEDIATE, 1, "ZMQ_IMMEDIATE");
    apply_curve_client(sock_, opts.curve);
    if (::zmq_connect(sock_.get(), endpoint.c_str()) != 0) {
      throw UsageError(fmt::format("cannot connect to {}: {}", endpoint, zerr()));
    }
  }

  const std::string& peer() const override { return peer_; }
  uint64_t dropped() const override { return dropped_; }
  bool is_loopback() const override { return false; }
  void* zmq_socket_handle() const override { return sock_.get(); }
  void* zmq_monitor_handle() const override { return monitor_.handle(); }

  void send(const Message& m, uint64_t request_id) override {
    send_bytes(encode(m, request_id), msg_type_name(type_of(m)));
  }

  void send_raw(std::span<const uint8_t> bytes) override {
    send_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), "raw bytes");
  }

  bool peer_lost() override {
    pump_monitor();
    return lost_;
  }

  std::optional<Envelope> recv_for(Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      zmq_pollitem_t items[2] = {{sock_.get(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      // A message that arrived before the link broke is still delivered first.
      if (poll_items(items, 2, remaining_ms(deadline)) == 0) return std::nullopt;
      if ((items[0].revents & ZMQ_POLLIN) != 0) {
        std::vector<std::unique_ptr<Frame>> frames;
        const size_t n = recv_message(sock_.get(), frames, 1);
        if (n == 0) continue;
        if (n != 1) {
          ++dropped_;
          log::warn("dropped a message from {}: {} frames, expected 1", peer_, n);
          continue;
        }
        auto env = decode_or_drop(frames[0]->bytes(), peer_, dropped_);
        if (env) return env;
        continue;
      }
      if (peer_lost()) throw NetError(lost_message());
    }
  }

 private:
  void send_bytes(std::vector<uint8_t> bytes, std::string_view what) {
    if (peer_lost()) throw NetError(lost_message());
    if (send_owned(sock_.get(), std::move(bytes), 0) < 0) {
      const int err = zmq_errno();
      if (err == EAGAIN) {
        // A CURVE handshake that fails for want of the right key looks the same from here:
        // the server drops what it cannot decrypt and the link never completes.
        throw NetError(fmt::format(
            "peer {}: could not send {} within {} ms (peer not reachable or not reading{})", peer_,
            what, opts_.send_timeout_ms,
            opts_.curve.enabled() ? ", or it does not hold this cluster key"
                                  : ", or it expects encrypted links: --key-file"));
      }
      throw NetError(fmt::format("peer {}: send {}: {}", peer_, what, zmq_strerror(err)));
    }
  }

  std::string lost_message() const {
    return fmt::format("peer {}: connection lost ({})", peer_,
                       lost_reason_.empty() ? "peer closed the link or died" : lost_reason_);
  }

  void pump_monitor() {
    monitor_.pump([this](uint16_t event, uint32_t) {
      if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        handshaken_ = true;
      } else if (event == ZMQ_EVENT_DISCONNECTED && handshaken_) {
        lost_ = true;
      } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ||
                 event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
        lost_ = true;
        lost_reason_ = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                           ? "authentication failed: the peers hold different keys"
                           : "handshake failed: peer does not speak ZMTP/CURVE as configured";
      }
    });
  }

  Socket sock_;
  // The monitor reports handshakes and disconnects, so a dead peer is noticed at once.
  Monitor monitor_{sock_.get(), ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                                    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                    ZMQ_EVENT_HANDSHAKE_FAILED_AUTH};
  std::string peer_;
  TransportOptions opts_;
  uint64_t dropped_ = 0;
  bool handshaken_ = false;
  bool lost_ = false;
  std::string lost_reason_;
};

}  // namespace

std::unique_ptr<Listener> zmq_listen(const std::string& endpoint, const TransportOptions& opts) {
  return std::make_unique<ZmqListener>(endpoint, opts);
}

std::unique_ptr<Connection> zmq_connect(const std::string& endpoint, const TransportOptions& opts) {
  return std::make_unique<ZmqConnection>(endpoint, opts);
}

size_t zmq_wait_any(std::span<Receiver* const> receivers, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  for (size_t i = 0; i < receivers.size(); ++i) {
    if (receivers[i]->peer_lost()) return i;
  }
  for (;;) {
    // (2 * receivers) poll items: the socket of each, then its monitor (or nothing).
    std::vector<zmq_pollitem_t> items;
    for (Receiver* r : receivers) {
      items.push_back({r->zmq_socket_handle(), 0, ZMQ_POLLIN, 0});
      void* mon = r->zmq_monitor_handle();
      items.push_back({mon, 0, static_cast<short>(mon != nullptr ? ZMQ_POLLIN : 0), 0});
    }
    // zmq_poll skips items with no events requested, but needs a valid socket; give the
    // monitor-less slots the receiver's own socket with no events.
    for (size_t i = 0; i < receivers.size(); ++i) {
      if (items[2 * i + 1].socket == nullptr) items[2 * i + 1].socket = items[2 * i].socket;
    }
    if (poll_items(items.data(), static_cast<int>(items.size()), remaining_ms(deadline)) == 0) {
      return receivers.size();
    }
    for (size_t i = 0; i < receivers.size(); ++i) {
      if ((items[2 * i].revents & ZMQ_POLLIN) != 0) return i;
      if ((items[2 * i + 1].revents & ZMQ_POLLIN) != 0 && receivers[i]->peer_lost()) return i;
    }
  }
}

}  // namespace hearth::net::detail
