// A ring worker (`hearth worker`): owns a model file, waits for a head on its control
// address, and for one head at a time runs the layer windows the head assigns it, receiving
// hidden states in its data inbox and sending them on to its successor.
//
// Session: Hello -> HelloAck (model identity, data inbox; Refuse if the head's model differs,
// checked before the worker says anything about itself) -> Assign -> Ready, then a loop of
// Activations (data plane), KvControl, Ping and Stop (control plane). The session ends on
// Stop, on the head's inbox going away (head died), or on a fatal error reported to the head
// as ErrorMsg. The worker then waits for the next head. Malformed messages are dropped by the
// transport with a logged reason; well-formed but wrong ones (bad window, wrong dim, more
// sequences than Assign.n_seq_max) are refused or dropped and the worker keeps serving. What a
// peer may ask is bounded (cluster/peer_limits.h), and a reply that cannot be delivered (the
// peer left) is logged, never fatal. Among the peers that can complete a handshake (holders of
// the cluster key, or anyone with --insecure), whoever says Hello first owns the session.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hearth/cluster/stage.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/net/transport.h"

namespace hearth::cluster {

struct WorkerOptions {
  std::string listen;      // control address, "tcp://HOST:PORT" or "loop://NAME"
  std::string model_path;  // local copy of the model
  int threads = 0;         // 0: what the head asks for (0 there too: all cores)
  std::string name;        // device name in the head's table; "" = listen address
  // This device's profile as DEVICES.json device JSON, computed on the first request of a
  // --plan auto head (cached by the caller); unset: an empty Profile is answered.
  std::function<std::string()> profile;
  net::TransportOptions transport;
  // This device's residency (the head decides only whether mmap-mode prefetch is on, through
  // Assign.prefetch).
  ResidencyOptions residency;
};

class Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();

  const std::string& endpoint() const;  // control address with the port resolved
  const std::string& name() const { return opt_.name; }
  const net::ModelIdentity& identity() const { return identity_; }
  bool busy() const { return busy_.load(); }  // in a session with a head (LAN announcements)

  // Serves heads one after another until `stop` becomes true (checked twice a second).
  void serve(const std::atomic<bool>& stop);

 private:
  struct Session;
  void run_session(const net::Incoming& hello);
  bool answer_setup_probe(const net::Envelope& msg, const net::PeerId& head);
  // Sends on the control listener; a peer that is gone or not reading is logged, never
  // allowed to end the process or the session (false: not sent).
  bool reply(const net::PeerId& to, const net::Message& m, uint64_t request_id = 0) noexcept;

  WorkerOptions opt_;
  gguf::GgufFile file_;
  net::ModelIdentity identity_;
  std::unique_ptr<net::Listener> control_;
  std::unique_ptr<net::Listener> inbox_;
  std::optional<std::string> profile_json_;  // computed once, on the first request
  const std::atomic<bool>* stop_ = nullptr;  // set by serve(); sessions end when it turns true
  std::atomic<bool> busy_{false};
};

}  // namespace hearth::cluster
