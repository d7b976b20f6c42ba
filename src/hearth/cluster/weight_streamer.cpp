#include "hearth/cluster/weight_streamer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/core.h>

#include "hearth/base/clock.h"
#include "hearth/base/enum_names.h"
#include "hearth/base/error.h"
#include "hearth/base/file_read.h"
#include "hearth/base/log.h"

namespace hearth::cluster {
namespace {

constexpr uint64_t kNoRoom = UINT64_MAX;
constexpr uint64_t kAlign = 4096;
// Requests outstanding at once (one per I/O thread), and the smallest chunk worth a request of
// its own.
constexpr int kIoThreads = 4;
constexpr uint64_t kMinChunk = uint64_t{512} << 10;

uint64_t page_size() {
  return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

constexpr EnumName<StreamIo> kStreamIoNames[] = {{StreamIo::kDirect, "direct"},
                                                 {StreamIo::kCache, "cache"}};

StreamIo parse_stream_io(std::string_view text) {
  return parse_enum(kStreamIoNames, text, "--stream-io");
}

std::string_view stream_io_name(StreamIo io) {
  return enum_name(kStreamIoNames, io);
}

std::string_view WeightStreamer::read_path() const {
  if (io_ == StreamIo::kCache) return "page cache";
  return direct_ ? "direct I/O" : "buffered reads";
}

WeightStreamer::WeightStreamer(const std::string& path, const uint8_t* mapping,
                               std::vector<residency::PlannedMatrix> matrices,
                               residency::StreamPlan plan, StreamIo io)
    : path_(path),
      mapping_(mapping),
      matrices_(std::move(matrices)),
      plan_(std::move(plan)),
      io_(io) {
  if (plan_.items.empty()) return;  // nothing streamed: no thread, no buffer
  for (const auto& it : plan_.items) {
    const size_t key = group_key(it.layer, it.group);
    if (key >= streamed_group_.size()) streamed_group_.resize(key + 1, false);
    streamed_group_[key] = true;
  }
  for (const auto& sg : plan_.sliced) {
    SlicedParts sp;
    for (const auto& part : sg.parts) {
      const residency::PlannedMatrix& m = matrices_[static_cast<size_t>(part.matrix)];
      sp.parts.push_back(model::GroupPart{m.view, part.row_begin, part.row_end});
      sp.streamed.push_back(part.streamed);
    }
    sliced_.emplace(group_key(sg.layer, sg.group), std::move(sp));
  }
  fd_ = io_ == StreamIo::kDirect ? open_direct(path_) : -1;
  direct_ = fd_ >= 0;
  probed_ = !direct_;
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw IoError(fmt::format("{}: cannot open for streaming: {}", path_, std::strerror(errno)));
  }
  const uint64_t page = page_size();
  // Cache mode: the capacity only bounds how far ahead the reader asks for pages.
  capacity_ = (plan_.buffer_bytes + page - 1) / page * page;
  if (io_ == StreamIo::kDirect) {
    void* p =
        ::mmap(nullptr, capacity_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      ::close(fd_);
      throw IoError(fmt::format("{}: cannot allocate a stream buffer of {} MiB: {}", path_,
                                capacity_ >> 20, std::strerror(errno)));
    }
    buffer_ = static_cast<uint8_t*>(p);
  }
  io_threads_.start(kIoThreads, [this](const Chunk& c) { read_queued(c); });
  thread_ = std::thread([this] { run(); });
}

WeightStreamer::~WeightStreamer() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  io_threads_.stop();
  if (buffer_ != nullptr) ::munmap(buffer_, capacity_);
  if (fd_ >= 0) ::close(fd_);
}

StreamCounters WeightStreamer::counters() const {
  std::lock_guard lock(mu_);
  StreamCounters c = counters_;
  const std::lock_guard io(io_mu_);
  c.read_ms = busy_ms_ + (in_flight_ > 0 ? now_ms() - busy_since_ms_ : 0.0);
  return c;
}

void WeightStreamer::pop_front() {
  if (io_ == StreamIo::kCache) to_drop_.push_back(slots_.front().item);
  slots_.pop_front();
}

uint64_t WeightStreamer::room_for(uint64_t bytes) const {
  if (bytes > capacity_) return kNoRoom;
  if (slots_.empty()) return 0;
  const uint64_t tail = slots_.front().offset;
  const uint64_t head = slots_.back().offset + slots_.back().bytes;
  if (slots_.back().offset >= tail) {  // in flight: [tail, head), free at both ends
    if (capacity_ - head >= bytes) return head;
    return tail >= bytes ? 0 : kNoRoom;
  }
  return tail - head >= bytes ? head : kNoRoom;  // wrapped: free is [head, tail)
}

void WeightStreamer::run() {
  std::unique_lock lock(mu_);
  while (!quit_) {
    if (!to_drop_.empty()) {  // before reading more, so the cache holds at most the buffer
      std::vector<size_t> drops;
      drops.swap(to_drop_);
      lock.unlock();
      for (size_t i : drops) drop_item(plan_.items[i]);
      lock.lock();
      continue;
    }
    const auto& item = plan_.items[next_item_];
    const uint64_t off = room_for(item.bytes);
    if (off == kNoRoom) {
      cv_.wait(lock);
      continue;
    }
    const uint64_t seq = next_seq_++;
    std::vector<Chunk> chunks =
        chunks_of(item, io_ == StreamIo::kDirect ? buffer_ + off : nullptr, seq);
    slots_.push_back(Slot{next_item_, off, item.bytes, seq, chunks.size(), chunks.empty(), false});
    next_item_ = (next_item_ + 1) % plan_.items.size();
    const bool probe = !probed_ && !chunks.empty();
    probed_ = true;
    lock.unlock();
    if (probe) {  // nothing is queued yet: the first chunk alone decides how the file is read
      const Chunk first = chunks.front();
      chunks.erase(chunks.begin());
      chunk_done(seq, probe_direct(first));
    }
    if (!chunks.empty()) io_threads_.push(chunks);
    lock.lock();
  }
}

std::vector<WeightStreamer::Chunk> WeightStreamer::chunks_of(const residency::StreamItem& item,
                                                             uint8_t* dst, uint64_t seq) const {
  // Chunks of each matrix's aligned extent, about a quarter of the item each.
  const uint64_t target =
      std::max(kMinChunk, (item.bytes / kIoThreads + kAlign - 1) / kAlign * kAlign);
  std::vector<Chunk> chunks;
  uint64_t pos = 0;
  for (const residency::FileRange& r : item.ranges) {
    const uint64_t begin = r.offset / kAlign * kAlign;
    const uint64_t len = residency::aligned_span(r.offset, r.bytes, kAlign);
    // Cache mode reads into the mapping in place (the populate call does not write).
    uint8_t* at = io_ == StreamIo::kCache ? const_cast<uint8_t*>(mapping_) + begin : dst + pos;
    for (uint64_t o = 0; o < len; o += target) {
      chunks.push_back(Chunk{at + o, begin + o, std::min(target, len - o), seq});
    }
    pos += len;
  }
  return chunks;
}

bool WeightStreamer::probe_direct(const Chunk& c) {
  const double t0 = now_ms();
  bool ok = read_chunk(c);
  if (!ok) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      {
        const std::lock_guard lock(io_mu_);  // no I/O thread is reading now
        ::close(fd_);
        fd_ = fd;
        direct_ = false;
      }
      log::info("stream {}: direct I/O refused, reading through the page cache", path_);
      ok = read_chunk(c);
    }
  }
  const std::lock_guard lock(io_mu_);
  busy_ms_ += now_ms() - t0;
  return ok;
}

void WeightStreamer::chunk_done(uint64_t seq, bool ok) {
  const std::lock_guard lock(mu_);
  for (auto& s : slots_) {
    if (s.seq != seq) continue;
    s.failed = s.failed || !ok;
    if (--s.pending == 0) {
      // The engine takes only ready slots, and never drops one that is not: s is still here.
      s.ready = true;
      counters_.bytes_read += s.failed ? 0 : s.bytes;
      ++counters_.items_read;
      cv_.notify_all();
    }
    return;
  }
}

bool WeightStreamer::read_chunk(const Chunk& c) {
  if (io_ == StreamIo::kCache) return cache_chunk(c);
  if (read_fully(fd_, c.dst, c.bytes, c.offset, !direct_) < 0) {
    log::warn("stream {}: read of {} bytes at {} failed: {}", path_, c.bytes, c.offset,
              std::strerror(errno));
    return false;
  }
  return true;
}

bool WeightStreamer::cache_chunk(const Chunk& c) {
  // Readahead of the whole chunk at once (the kernel splits it into large requests), then
  // wait for its pages and map them, so the engine neither faults nor waits on them. (Faulting
  // the range in under MADV_SEQUENTIAL instead costs less CPU outside a memory limit, but
  // inside one it read beyond the streamed ranges and ran slower: docs/residency.md.)
  ::posix_fadvise(fd_, static_cast<off_t>(c.offset), static_cast<off_t>(c.bytes),
                  POSIX_FADV_WILLNEED);
#ifdef MADV_POPULATE_READ
  if (::madvise(c.dst, c.bytes, MADV_POPULATE_READ) == 0) return true;
  if (errno != EINVAL) {
    log::warn("stream {}: populating {} bytes at {} failed: {}", path_, c.bytes, c.offset,
              std::strerror(errno));
    return false;
  }
#endif
  // No MADV_POPULATE_READ (kernels before 5.14, other OSes): touch a byte per page; each
  // touch waits for the read the advice started.
  const uint64_t page = page_size();
  uint8_t sink = 0;
  for (uint64_t o = 0; o < c.bytes; o += page)
    sink ^= *static_cast<volatile const uint8_t*>(c.dst + o);
  (void)sink;
  return true;
}

void WeightStreamer::drop_item(const residency::StreamItem& item) {
  // Whole pages only: a page shared with a neighbouring tensor (or slice) stays.
  const uint64_t page = page_size();
  for (const residency::FileRange& r : item.ranges) {
    const uint64_t begin = (r.offset + page - 1) / page * page;
    const uint64_t end = (r.offset + r.bytes) / page * page;
    if (end <= begin) continue;
    // madvise does not write through the pointer: it unmaps the pages from this process, so
    // that the cache may drop them.
    ::madvise(const_cast<uint8_t*>(mapping_) + begin, end - begin, MADV_DONTNEED);
    ::posix_fadvise(fd_, static_cast<off_t>(begin), static_cast<off_t>(end - begin),
                    POSIX_FADV_DONTNEED);
  }
}

void WeightStreamer::read_queued(const Chunk& c) {
  {
    const std::lock_guard lock(io_mu_);
    if (in_flight_++ == 0) busy_since_ms_ = now_ms();
  }
  const bool ok = read_chunk(c);
  {
    const std::lock_guard lock(io_mu_);
    if (--in_flight_ == 0) busy_ms_ += now_ms() - busy_since_ms_;
  }
  chunk_done(c.seq, ok);
}

size_t WeightStreamer::group_key(int layer, int group) {
  return static_cast<size_t>(layer) * model::kMatrixGroups + static_cast<size_t>(group);
}

std::span<const model::GroupPart> WeightStreamer::parts(int layer, model::MatrixGroup g) const {
  if (layer < 0) return {};
  const auto it = sliced_.find(group_key(layer, static_cast<int>(g)));
  if (it == sliced_.end()) return {};
  return it->second.parts;
}

WeightStreamer::Slot WeightStreamer::take(int layer, int group, int part) {
  std::unique_lock lock(mu_);
  if (held_) {  // the last pass ended without release (an exception in compute)
    pop_front();
    held_ = false;
    cv_.notify_all();
  }
  const double t0 = now_ms();
  for (;;) {
    cv_.wait(lock, [&] { return !slots_.empty() && slots_.front().ready; });
    const auto& it = plan_.items[slots_.front().item];
    if (it.layer == layer && it.group == group && it.part == part) break;
    // A pass was cut short (or started mid-cycle): skip to the group the engine asks for.
    pop_front();
    cv_.notify_all();
  }
  counters_.exposed_ms += now_ms() - t0;
  held_ = true;
  return slots_.front();
}

const uint8_t* WeightStreamer::in_buffer(const Slot& s, const uint8_t* in_map) const {
  // Failed: the engine reads the mapping, slower, same bytes. Cache mode: it reads the mapping,
  // where the pages now are.
  if (s.failed || io_ == StreamIo::kCache) return in_map;
  uint64_t pos = 0;
  for (const residency::FileRange& r : plan_.items[s.item].ranges) {
    if (in_map == mapping_ + r.offset) return buffer_ + s.offset + pos + (r.offset % kAlign);
    pos += residency::aligned_span(r.offset, r.bytes, kAlign);
  }
  return in_map;
}

void WeightStreamer::acquire(int layer, model::MatrixGroup g, model::GroupViews& v) {
  const int group = static_cast<int>(g);
  const size_t key = group_key(layer, group);
  if (layer < 0 || key >= streamed_group_.size() || !streamed_group_[key]) return;
  const Slot s = take(layer, group, -1);
  for (int j = 0; j < v.count; ++j) {
    v.views[j]->data = in_buffer(s, static_cast<const uint8_t*>(v.views[j]->data));
  }
}

void WeightStreamer::acquire_part(int layer, model::MatrixGroup g, int part,
                                  compute::WeightView& slice) {
  const int group = static_cast<int>(g);
  const auto it = sliced_.find(group_key(layer, group));
  if (layer < 0 || it == sliced_.end() || part < 0 ||
      static_cast<size_t>(part) >= it->second.streamed.size() ||
      !it->second.streamed[static_cast<size_t>(part)]) {
    return;  // a resident part of the group: the engine reads the mapping
  }
  const Slot s = take(layer, group, part);
  slice.data = in_buffer(s, static_cast<const uint8_t*>(slice.data));
}

void WeightStreamer::give_back(int layer, int group, int part) {
  std::lock_guard lock(mu_);
  if (!held_ || slots_.empty()) return;
  const auto& it = plan_.items[slots_.front().item];
  if (it.layer != layer || it.group != group || it.part != part) return;
  pop_front();
  held_ = false;
  cv_.notify_all();
}

void WeightStreamer::release(int layer, model::MatrixGroup g) {
  give_back(layer, static_cast<int>(g), -1);
}

void WeightStreamer::release_part(int layer, model::MatrixGroup g, int part) {
  give_back(layer, static_cast<int>(g), part);
}

}  // namespace hearth::cluster
