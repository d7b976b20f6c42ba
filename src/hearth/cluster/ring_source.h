// The head of a pipelined ring (device 0): a LogitsSource, so `hearth run --workers` drives
// it with the same generate() loop as a single device.
//
// Set-up: connect to each worker's control address in ring order, Hello/HelloAck (refusing a
// worker whose model identity differs), Assign its windows and successor, wait for Ready.
// eval()/eval_batch(): embed on the head, then per round: the head runs its own window and sends
// the hidden state (exact f32) to device 1; each device sends straight to the next; the last device
// of the round (or the one that ran the model's last layer) sends back to the head's inbox. The
// head then starts the next round or computes logits. Failure: while waiting, the head watches
// every worker connection: a dead worker (link lost, or ZMTP heartbeats missing for a stalled
// process) or an ErrorMsg throws NetError naming the worker's address; a step that takes longer
// than step_timeout_ms names the ring.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hearth/cluster/stage.h"
#include "hearth/cluster/windows.h"
#include "hearth/gguf/gguf_file.h"
#include "hearth/head/logits_source.h"
#include "hearth/model/engine.h"
#include "hearth/net/transport.h"
#include "hearth/plan/prefill.h"
#include "hearth/residency/device_meter.h"

namespace hearth::cluster {

inline constexpr int64_t kAutoChunk = -1;
inline constexpr int64_t kDefaultChunk = 128;

struct RingOptions {
  std::vector<std::string> workers;  // control addresses in ring order (device 1, 2, ...)
  std::vector<int> plan;             // window size per device incl. the head; empty: even
  int threads = 0;                   // head's threads (0: all cores); workers decide their own
  int64_t n_ctx = 0;                 // 0: engine default
  compute::KvTypes kv_types = {};    // every device's KV cache types (sent in Assign)
  int n_seq_max = 1;     // sequences the workers must hold KV caches for (serve: --parallel)
  bool prefetch = true;  // mmap mode: prefetch each device's next window (sent to the workers)
  ResidencyOptions residency;  // the head's own device (.prefetch is taken from `prefetch`)
  int handshake_timeout_ms = 5000;
  int step_timeout_ms = 60000;  // one eval() through the whole ring (per chunk when pipelined)
  // Pipelined prefill: a single sequence's eval of more tokens than this goes around the
  // ring in chunks of this many tokens that follow each other (chunk c on device 2 while
  // chunk c + 1 is on device 1). 0: the whole batch in one trip. kAutoChunk: the chunk
  // prefill_model finds fastest for each prompt, or kDefaultChunk with workers and no model.
  int64_t prefill_chunk = 0;
  std::optional<plan::PrefillModel> prefill_model;
  // false: each chunk makes its whole trip before the next one starts (prima.cpp's batches
  // one after another: the baseline pipelining is measured against).
  bool prefill_pipelined = true;
  net::TransportOptions transport;
};

struct RingDevice {
  std::string name;
  std::string address;          // control address ("head" for device 0)
  int w = 0;                    // window size per round (the head's may be 0)
  std::vector<Window> windows;  // (k) per round
};

class RingSource : public head::LogitsSource {
 public:
  // `file` must outlive the source. Throws UsageError (bad plan, other model) or NetError.
  RingSource(const gguf::GgufFile& file, RingOptions options);
  ~RingSource() override;  // tells the workers to stop

  // Several sequences in one trip around the ring: one Activations message per hop carries
  // every item's rows (continuous batching). Each item as eval() would do it alone, bitwise.
  void eval_batch(std::span<const model::EvalItem> items) override;
  int64_t vocab() const override;
  int64_t n_ctx() const override;
  int64_t seq_length(int64_t seq) const override;
  void truncate(int64_t seq, int64_t n_pos) override;  // on every device
  void drop(int64_t seq) override;

  const std::vector<RingDevice>& devices() const { return devices_; }
  int rounds() const { return rounds_; }
  model::Engine& engine() { return stage_->engine(); }
  const Stage& head_stage() const { return *stage_; }
  // Bytes the head asked the kernel to prefetch (page-rounded; 0 when off or k = 1).
  uint64_t prefetched_bytes() const { return stage_->prefetched_bytes(); }
  // Residency metrics per device (ring order), summed over token steps: the head's own, and
  // the workers' from their Stats messages (collected up to now: pings each worker and reads
  // its control link up to the Pong, so every Stats sent before is in).
  std::vector<residency::DeviceTotals> device_stats();
  bool head_releases() const { return stage_->releases(); }
  // After a NetError: the workers (indices into RingOptions::workers) whose links were lost at
  // that moment; empty when the failure was not a lost device (a timeout, a worker's error).
  const std::vector<size_t>& lost_workers() const { return lost_; }
  // The chunk size a prefill of n tokens of one sequence goes around the ring in (n: in one
  // trip).
  int64_t chunk_for(int64_t n) const;

 private:
  struct Peer {
    std::string address;
    std::unique_ptr<net::Connection> control;
    std::string data_endpoint;  // reachable address of its inbox
    std::string head_inbox;     // the head's inbox as this worker should reach it
    bool greeted = false;       // answered Hello, so it waits for Assign or Stop
  };
  void connect_workers(int n_devices, int n_layers,
                       const std::vector<std::vector<Window>>& windows);
  void stop_all(const std::string& reason) noexcept;
  net::Activations wait_hidden(uint64_t step, const std::string& waiting_for);
  // The next hidden state for a step in [lo, hi) that comes back by `deadline_ms` (now_ms()
  // clock; now: only what has arrived), with its step; nullopt when none did. Watches the
  // workers meanwhile (fail_peer on a lost one or an ErrorMsg).
  std::optional<std::pair<uint64_t, net::Activations>> poll_hidden(uint64_t lo, uint64_t hi,
                                                                   double deadline_ms);
  // Pipelined prefill of one sequence (RingOptions::prefill_chunk).
  void eval_pipelined(const model::EvalItem& item);
  // Sends the hidden state of `segments` after the head's window of round r to device 1.
  void send_round(int r, const std::vector<net::SeqSegment>& segments, std::vector<float> hidden,
                  uint64_t step);
  [[noreturn]] void fail_peer(size_t i, const std::string& what);
  void send_kv(const net::KvCommand& c);

  const gguf::GgufFile& file_;
  RingOptions opt_;
  std::vector<RingDevice> devices_;
  int rounds_ = 1;
  // The head has no layers and two or more workers follow it: the last worker sends each
  // round's hidden state straight to the first, and the head sees the token once (sends
  // round 0, receives the final hidden state).
  bool wrap_ = false;
  std::unique_ptr<Stage> stage_;                  // the head's own device
  std::unordered_map<int64_t, int64_t> seq_len_;  // positions of each sequence in the ring
  std::vector<residency::DeviceTotals> totals_;   // (n_devices) workers' from Stats
  void absorb_stats(size_t peer, const net::Stats& st);
  std::unique_ptr<net::Listener> inbox_;
  std::vector<Peer> peers_;                     // devices 1..N-1
  std::unique_ptr<net::Connection> successor_;  // device 1's inbox
  uint64_t step_ = 0;
  std::vector<size_t> lost_;   // see lost_workers()
  std::vector<float> hidden_;  // (n_tokens, dim) f32 scratch
};

}  // namespace hearth::cluster
