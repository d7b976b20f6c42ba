// A device's experts when its memory cannot hold them all (a mixture of experts, issue 24).
// Dense weights are read every token and take memory first (cluster::Stage); the experts get
// what is left. Those kept resident are read through the file mapping and stay in the page
// cache; the others are read when the router picks them, with direct I/O into a buffer of one
// token's experts, so they neither evict the resident ones nor stay cached. The router picks
// them only at their layer, so they cannot be read ahead as dense windows are.
//
// Which experts stay resident follows their popularity on this device: each layer counts the
// uses of its experts and, every kRerankUses uses, keeps its most used ones (the counts then
// halve, so the choice follows a drifting workload). At the start every expert is as likely
// (the cost model's uniform popularity) and each layer keeps its lowest-numbered ones.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hearth/base/huge_buffer.h"
#include "hearth/cluster/io_threads.h"
#include "hearth/model/weight_feed.h"
#include "hearth/model/weights.h"

namespace hearth::cluster {

class ExpertStore final : public model::ExpertFeed {
 public:
  struct Counters {
    uint64_t uses = 0;          // experts the router picked (each row's k, per layer)
    uint64_t reads = 0;         // of those, read from the file (not resident)
    uint64_t bytes_read = 0;    // bytes those reads took (whole aligned blocks)
    uint64_t expert_bytes = 0;  // the bytes of the experts read (their matrices exactly)
    double read_ms = 0;         // time spent reading them (compute waits all of it)
  };

  // Uses between two choices of a layer's resident experts.
  static constexpr uint64_t kRerankUses = 256;

  // `views`: the engine's weights (views into `mapping`, the file's mapping, GGUF layout);
  // `layers`: the model layers this device runs; `resident_bytes`: what the resident experts
  // may take. Opens `path` for direct I/O (buffered reads where the OS refuses it). IoError
  // when the file cannot be opened or the buffer allocated.
  ExpertStore(const std::string& path, const uint8_t* mapping, const model::ModelWeights& views,
              std::span<const int> layers, uint64_t resident_bytes);
  ~ExpertStore() override;
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  int max_experts() const override { return max_experts_; }
  void acquire_experts(int layer, std::span<const int32_t> ids,
                       std::span<model::ExpertWeights> views) override;

  Counters counters() const;
  // Bytes of the read buffer (one token's experts, in whole aligned blocks).
  uint64_t buffer_bytes() const { return buffer_bytes_; }
  // Experts resident now, over all this device's layers, and their bytes.
  uint64_t resident_experts() const;
  uint64_t resident_bytes() const;
  // Byte ranges of the resident experts, or of the others, of model layers [begin, end) (for
  // warming and dropping pages, and for measuring what was resident).
  std::vector<std::pair<const uint8_t*, uint64_t>> ranges(bool resident, int begin = 0,
                                                          int end = INT32_MAX) const;

  // Bytes of one expert of a layer (its three matrices), and the buffer a device needs for k
  // of its largest experts when some are not resident.
  static uint64_t expert_bytes(const model::ExpertWeights& e);
  static uint64_t buffer_bytes_for(const model::ModelWeights& views, std::span<const int> layers);

 private:
  struct Layer {
    int model_layer = -1;
    std::vector<uint8_t> resident;  // (n_experts) 1: read through the mapping
    std::vector<uint64_t> uses;     // (n_experts) popularity, halved at each choice
    uint64_t since_rerank = 0;
    uint32_t keep = 0;  // how many stay resident
  };
  void rerank(Layer& l);
  void drop_pages(const model::ExpertWeights& e) const;
  // One aligned read of a matrix into the buffer.
  struct Read {
    uint64_t offset = 0, bytes = 0;
    uint8_t* dst = nullptr;
  };
  // Reads expert `e`'s three matrices into slot j of the buffer (queued: read_all() does them)
  // and points `v` at where they will be.
  void queue_reads(const model::ExpertWeights& e, int slot, model::ExpertWeights& v);
  // Runs the queued reads on the I/O threads, several at once (a token's experts are small
  // reads: one after another they would wait on the disk's latency, not its rate); false when
  // one failed.
  bool read_all();
  bool read(const Read& r);

  std::string path_;
  const uint8_t* mapping_;
  const model::ModelWeights& weights_;
  std::vector<Layer> layers_;
  std::vector<int> local_;  // model layer -> index into layers_, -1 if not this device's
  int max_experts_ = 0;
  int fd_ = -1;
  bool direct_ = false;
  HugeBuffer buffer_;
  uint64_t buffer_bytes_ = 0, slot_bytes_ = 0;
  mutable std::mutex mu_;  // counters (read by the stats thread)
  Counters counters_;
  // The reads of one read_all() and how many of them are still running.
  static constexpr int kIoThreads = 4;
  std::vector<Read> batch_;
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  int pending_ = 0;
  bool failed_ = false;
  IoThreads<Read> io_;
};

}  // namespace hearth::cluster
