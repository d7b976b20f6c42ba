// In-process implementation of transport.h (loop://NAME endpoints). Messages travel as
// encoded bytes through queues, so the codec and the drop-on-garbage path are the same ones
// the tcp transport runs.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

#include <fmt/core.h>

#include "hearth/base/error.h"
#include "hearth/base/log.h"
#include "hearth/net/transport_impl.h"

namespace hearth::net::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Queue {
  std::deque<std::pair<PeerId, std::vector<uint8_t>>> items;  // (sender, message bytes)
  bool closed = false;
};

// All loopback state of the process behind one mutex; one condition variable wakes every
// waiter on any change, which keeps wait_any() simple (tests, not throughput).
struct Hub {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::shared_ptr<Queue>> listeners;  // endpoint -> inbox
  std::map<PeerId, std::weak_ptr<Queue>> connections;       // connection id -> inbox
  uint64_t next_id = 1;
};

Hub& hub() {
  static Hub* const h = new Hub();  // never destroyed: outlives every static user
  return *h;
}

class LoopListener final : public Listener {
 public:
  LoopListener(const std::string& endpoint, const TransportOptions& opts)
      : endpoint_(endpoint), max_bytes_(opts.max_message_bytes), inbox_(std::make_shared<Queue>()) {
    std::lock_guard lock(hub().mu);
    if (!hub().listeners.emplace(endpoint, inbox_).second) {
      throw NetError(fmt::format("cannot listen on {}: address already in use", endpoint));
    }
  }
  ~LoopListener() override {
    std::lock_guard lock(hub().mu);
    inbox_->closed = true;
    hub().listeners.erase(endpoint_);
    hub().cv.notify_all();
  }

  const std::string& endpoint() const override { return endpoint_; }
  uint64_t dropped() const override { return dropped_; }
  bool is_loopback() const override { return true; }
  bool loop_ready() const override { return !inbox_->items.empty(); }

  std::optional<Incoming> recv_for(Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      std::pair<PeerId, std::vector<uint8_t>> item;
      {
        std::unique_lock lock(hub().mu);
        if (!hub().cv.wait_until(lock, deadline, [&] { return !inbox_->items.empty(); })) {
          return std::nullopt;
        }
        item = std::move(inbox_->items.front());
        inbox_->items.pop_front();
      }
      const std::string label = fmt::format("loop conn {} (on {})", item.first, endpoint_);
      if (item.second.size() > max_bytes_) {
        ++dropped_;
        log::warn("dropped a {}-byte message from {}: exceeds limit {}", item.second.size(), label,
                  max_bytes_);
        continue;
      }
      auto env = decode_or_drop(item.second, label, dropped_);
      if (env) return Incoming{item.first, label, std::move(*env)};
    }
  }

  void send(const PeerId& to, const Message& m, uint64_t request_id) override {
    std::vector<uint8_t> bytes = encode(m, request_id);
    std::lock_guard lock(hub().mu);
    const auto it = hub().connections.find(to);
    std::shared_ptr<Queue> q = it == hub().connections.end() ? nullptr : it->second.lock();
    if (!q) {
      throw NetError(fmt::format("listener {}: cannot send {} to loop conn {}: peer is gone",
                                 endpoint_, msg_type_name(type_of(m)), to));
    }
    q->items.emplace_back(endpoint_, std::move(bytes));
    hub().cv.notify_all();
  }

 private:
  std::string endpoint_;
  uint64_t max_bytes_;
  std::shared_ptr<Queue> inbox_;
  uint64_t dropped_ = 0;
};

class LoopConnection final : public Connection {
 public:
  LoopConnection(const std::string& endpoint, const TransportOptions& opts)
      : peer_(endpoint), max_bytes_(opts.max_message_bytes), inbox_(std::make_shared<Queue>()) {
    std::lock_guard lock(hub().mu);
    id_ = std::to_string(hub().next_id++);
    hub().connections.emplace(id_, inbox_);
  }
  ~LoopConnection() override {
    std::lock_guard lock(hub().mu);
    hub().connections.erase(id_);
  }

  const std::string& peer() const override { return peer_; }
  uint64_t dropped() const override { return dropped_; }
  bool is_loopback() const override { return true; }
  bool loop_ready() const override { return !inbox_->items.empty() || lost_locked(); }

  void send(const Message& m, uint64_t request_id) override {
    push(encode(m, request_id), msg_type_name(type_of(m)));
  }
  void send_raw(std::span<const uint8_t> bytes) override {
    push(std::vector<uint8_t>(bytes.begin(), bytes.end()), "raw bytes");
  }

  bool peer_lost() override {
    std::lock_guard lock(hub().mu);
    return lost_locked();
  }

  std::optional<Envelope> recv_for(Millis timeout) override {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      std::vector<uint8_t> bytes;
      {
        std::unique_lock lock(hub().mu);
        if (!hub().cv.wait_until(lock, deadline, [&] { return loop_ready(); })) {
          return std::nullopt;
        }
        if (inbox_->items.empty()) throw NetError(lost_message());
        bytes = std::move(inbox_->items.front().second);
        inbox_->items.pop_front();
      }
      if (bytes.size() > max_bytes_) {
        ++dropped_;
        log::warn("dropped a {}-byte message from {}: exceeds limit {}", bytes.size(), peer_,
                  max_bytes_);
        continue;
      }
      auto env = decode_or_drop(bytes, peer_, dropped_);
      if (env) return env;
    }
  }

 private:
  // Caller holds hub().mu. Lost once the listener we reached has been destroyed.
  bool lost_locked() const {
    if (!target_) return false;
    return target_->closed;
  }

  std::string lost_message() const {
    return fmt::format("peer {}: connection lost (listener closed)", peer_);
  }

  void push(std::vector<uint8_t> bytes, std::string_view what) {
    std::lock_guard lock(hub().mu);
    if (!target_) {
      const auto it = hub().listeners.find(peer_);
      if (it == hub().listeners.end()) {
        throw NetError(
            fmt::format("peer {}: could not send {}: nothing listens there", peer_, what));
      }
      target_ = it->second;
    }
    if (target_->closed) throw NetError(lost_message());
    target_->items.emplace_back(id_, std::move(bytes));
    hub().cv.notify_all();
  }

  std::string peer_;
  uint64_t max_bytes_;
  std::shared_ptr<Queue> inbox_;
  std::shared_ptr<Queue> target_;  // the listener's inbox, once reached
  PeerId id_;
  uint64_t dropped_ = 0;
};

}  // namespace

std::unique_ptr<Listener> loop_listen(const std::string& endpoint, const TransportOptions& opts) {
  return std::make_unique<LoopListener>(endpoint, opts);
}

std::unique_ptr<Connection> loop_connect(const std::string& endpoint,
                                         const TransportOptions& opts) {
  return std::make_unique<LoopConnection>(endpoint, opts);
}

size_t loop_wait_any(std::span<Receiver* const> receivers, Millis timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(hub().mu);
  size_t ready = receivers.size();
  hub().cv.wait_until(lock, deadline, [&] {
    for (size_t i = 0; i < receivers.size(); ++i) {
      if (receivers[i]->loop_ready()) {
        ready = i;
        return true;
      }
    }
    return false;
  });
  return ready;
}

}  // namespace hearth::net::detail
