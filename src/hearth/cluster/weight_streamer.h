// The streamed part of a device's weights (issue 16; residency/stream_plan.h says which
// matrices): a reader thread reads each streamed group of matrices into a bounded ring buffer
// ahead of its use, in the cyclic order the engine uses them (window after window, token
// after token), and the engine takes them from there (model::WeightFeed). A group's buffer
// space is reused as soon as the engine gives it back, so the reader runs ahead by at most
// the buffer: while the others compute, and while this device computes its resident layers.
//
// Two ways to read (StreamIo):
//   direct  reads bypass the page cache (O_DIRECT, aligned extents) into an anonymous ring
//           buffer: the least CPU per byte, but the buffer is memory the OS cannot reclaim.
//           Where direct I/O is refused (tmpfs, some file systems, other OSes) it falls back
//           to buffered pread followed by POSIX_FADV_DONTNEED on the range.
//   cache   the buffer is the page cache itself: the reader asks for a group's pages
//           (POSIX_FADV_WILLNEED) and waits for them in the file mapping
//           (MADV_POPULATE_READ), the engine computes from the mapping, and after its use the
//           group's whole pages are dropped (MADV_DONTNEED + POSIX_FADV_DONTNEED). Every byte
//           streamed stays reclaimable, so memory pressure counts only the KV cache and the
//           working buffers; the kernel's page-cache work costs more CPU per byte than
//           direct I/O.
// Either way streaming never evicts the resident part and reads exactly the streamed bytes.
//
// Reads are split into chunks read in parallel by a few I/O threads, across items: as soon as
// the buffer has room for the next item its chunks join the queue, while the chunks of the
// items before it are still being read. Storage that serves one request at a time with a
// fixed latency (virtual disks, network storage, SD cards with queues) reaches its throughput
// only with several requests outstanding, and a small buffer (a few items) must not idle the
// disk between items.
//
// Bitwise: the engine computes on the same bytes it would read from the mapping.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hearth/cluster/io_threads.h"
#include "hearth/model/weight_feed.h"
#include "hearth/residency/stream_plan.h"

namespace hearth::cluster {

enum class StreamIo { kDirect, kCache };
// "direct" | "cache"; UsageError naming --stream-io otherwise.
StreamIo parse_stream_io(std::string_view text);
std::string_view stream_io_name(StreamIo io);

struct StreamCounters {
  uint64_t bytes_read = 0;  // file bytes read into the buffer (aligned extents)
  double read_ms = 0;       // time the reader spent in reads
  double exposed_ms = 0;    // time the engine waited for a group not yet read
  uint64_t items_read = 0;
};

class WeightStreamer : public model::WeightFeed {
 public:
  // `path` is the model file; `mapping` its mapping (the engine's views point into it, so a
  // view's file offset is its pointer minus mapping). `plan` from residency::plan_stream over
  // `matrices` (same indices); `mapping` must map the whole file. Starts reading at once.
  // Throws IoError if the file cannot be opened or the buffer cannot be allocated.
  WeightStreamer(const std::string& path, const uint8_t* mapping,
                 std::vector<residency::PlannedMatrix> matrices, residency::StreamPlan plan,
                 StreamIo io = StreamIo::kDirect);
  ~WeightStreamer() override;
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  void acquire(int layer, model::MatrixGroup g, model::GroupViews& v) override;
  void release(int layer, model::MatrixGroup g) override;
  std::span<const model::GroupPart> parts(int layer, model::MatrixGroup g) const override;
  void acquire_part(int layer, model::MatrixGroup g, int part, compute::WeightView& slice) override;
  void release_part(int layer, model::MatrixGroup g, int part) override;

  StreamCounters counters() const;
  bool direct_io() const { return direct_; }
  // How the bytes arrive, for logs: "direct I/O", "buffered reads" (direct I/O refused) or
  // "page cache".
  std::string_view read_path() const;
  const residency::StreamPlan& plan() const { return plan_; }

 private:
  struct Slot {
    size_t item = 0;      // index into plan_.items
    uint64_t offset = 0;  // in the buffer
    uint64_t bytes = 0;   // taken in the buffer
    uint64_t seq = 0;     // which reservation: chunks find their slot by it
    size_t pending = 0;   // chunks not yet read
    bool ready = false;   // read complete
    bool failed = false;  // read failed: the engine reads the mapping instead
  };
  struct Chunk {
    uint8_t* dst = nullptr;  // direct: in the buffer; cache: in the mapping
    uint64_t offset = 0;     // file offset, aligned
    uint64_t bytes = 0;      // aligned, except where the file ends
    uint64_t seq = 0;        // the slot it fills
  };
  struct SlicedParts {
    std::vector<model::GroupPart> parts;
    std::vector<bool> streamed;
  };
  static size_t group_key(int layer, int group);
  // Waits for the item (layer, group, part) at the front and holds it (skipping items a cut
  // pass left behind); releases with give_back.
  Slot take(int layer, int group, int part);
  void give_back(int layer, int group, int part);
  // Where the item in slot `s` holds the bytes the mapping has at `in_map` (one of its ranges'
  // starts); `in_map` itself when the engine reads the mapping.
  const uint8_t* in_buffer(const Slot& s, const uint8_t* in_map) const;
  void run();
  // One chunk on an I/O thread.
  void read_queued(const Chunk& c);
  // The chunks of an item, about a quarter of it each, into dst (direct) or the mapping.
  std::vector<Chunk> chunks_of(const residency::StreamItem& item, uint8_t* dst, uint64_t seq) const;
  // The first read: direct I/O may be refused at this alignment; then the file is reopened
  // for buffered reads. False if the chunk cannot be read either way.
  bool probe_direct(const Chunk& c);
  // A chunk of slot `seq` is done (mu_ not held).
  void chunk_done(uint64_t seq, bool ok);
  bool read_chunk(const Chunk& c);
  bool cache_chunk(const Chunk& c);
  // Cache mode: drops the whole pages of an item the engine is done with.
  void drop_item(const residency::StreamItem& item);
  // Takes the oldest slot off (mu_ held); cache mode queues its pages to be dropped.
  void pop_front();
  // Buffer offset for `bytes` after the slots in flight, or UINT64_MAX if no room now.
  uint64_t room_for(uint64_t bytes) const;

  std::string path_;
  const uint8_t* mapping_;
  std::vector<residency::PlannedMatrix> matrices_;
  residency::StreamPlan plan_;
  std::vector<bool> streamed_group_;  // (layer * kMatrixGroups + group) has a streamed item
  std::unordered_map<size_t, SlicedParts> sliced_;  // groups read in parts, by group_key
  StreamIo io_;
  int fd_ = -1;
  bool direct_ = false;
  uint8_t* buffer_ = nullptr;
  uint64_t capacity_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Slot> slots_;       // in use order: the oldest is the next the engine takes
  size_t next_item_ = 0;         // the next item the reader reads
  uint64_t next_seq_ = 0;        // the next slot's seq
  bool probed_ = false;          // the first read has tried direct I/O
  bool held_ = false;            // the engine holds slots_.front()
  std::vector<size_t> to_drop_;  // cache mode: items released, pages not yet dropped
  bool quit_ = false;
  StreamCounters counters_;
  std::thread thread_;

  // The time at least one chunk was being read.
  // Lock order: mu_ before io_mu_ (counters()); nothing takes mu_ while holding io_mu_.
  mutable std::mutex io_mu_;
  int in_flight_ = 0;
  double busy_since_ms_ = 0;
  double busy_ms_ = 0;
  // The I/O threads, given chunks in use order.
  IoThreads<Chunk> io_threads_;
};

}  // namespace hearth::cluster
